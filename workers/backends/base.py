"""The backend interface: a model is a class with a name, its registry
settings (from catalog), and one method that yields text.

`generate(job, cancel)` is a generator of text pieces (and, for backends
with native tool calling, complete `NativeCall`s) whose return value is an
`Outcome`. The runner owns timing, limits, abort checks and publishing, so a
backend only produces text. Closing the generator must stop generation; a
backend that blocks in I/O also registers a `cancel` callback to unblock.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

from catalog.model_info import BackendSettings
from protocol.contract import EmbedSpec, Job
from protocol.errors import BackendError
from workers.cancel import Cancel
from workers.model_output import Embedded, TextGenerator


CHARACTERS_PER_TOKEN_ESTIMATE = 4  # OpenAI's rule of thumb for English text and code


def too_long(index: int, tokens: int, context: int) -> BackendError:
    """An input over the context, with truncation off."""
    return BackendError(f"input {index} is {tokens} tokens, more than the {context}-token context it is embedded "
                        "in (send truncate: true to cut it)", 400)


class Backend(ABC):
    name: ClassVar[str]
    # A backend that reads no prompt (echo) gets the client's messages as sent,
    # instead of the text-only rendering with tool instructions.
    reads_prompt: ClassVar[bool] = True
    # Follows a job's GBNF `grammar` (so a forced tool call is guaranteed).
    constrains_output: ClassVar[bool] = False

    def __init__(self, model_name: str, settings: BackendSettings):
        self.model_name = model_name
        self.settings = settings

    @abstractmethod
    def generate(self, job: Job, cancel: Cancel | None = None) -> TextGenerator:
        """Yield text pieces for the job; return its Outcome. The job has
        either chat `messages` or a raw `prompt` (see workers.prompts)."""

    def embed(self, spec: EmbedSpec, cancel: Cancel | None = None) -> Embedded:
        """One vector per input, in order (not normalised)."""
        raise BackendError(f'model "{self.model_name}" cannot make embeddings ({self.name} backend)', 400)

    def count_tokens(self, job: Job) -> int:
        """The job's prompt in tokens, as `generate` would report them. This
        default (for backends that cannot tokenize: upstreams) estimates a
        token per 4 characters of the messages and tool definitions."""
        return -(-job.prompt_characters() // CHARACTERS_PER_TOKEN_ESTIMATE)

    def count_text(self, text: str) -> int:
        """A text's tokens, as this backend's model would count them (this
        default estimates, at the same rate as count_tokens)."""
        return -(-len(text) // CHARACTERS_PER_TOKEN_ESTIMATE)

    def load(self) -> int:
        """Make the model ready (an empty request); nanoseconds spent."""
        return 0

    def keep_loaded(self, seconds: float | None) -> None:
        """After a job: how long the model may stay loaded while idle
        (None: the backend's default; < 0: forever; 0: unload now)."""
