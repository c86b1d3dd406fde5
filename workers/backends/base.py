"""The backend interface: a model is a class with a name, its registry
settings, and one method that yields text.

`generate(job, cancel)` is a generator of text pieces (and, for backends
with native tool calling, complete `NativeCall`s) whose return value is an
`Outcome`. The runner owns timing, limits, abort checks and publishing, so a
backend only produces text. Closing the generator must stop generation; a
backend that blocks in I/O also registers a `cancel` callback to unblock.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar, Generator, Literal, Union

from pydantic import BaseModel, ConfigDict

from workers.cancel import Cancel
from workers.contract import Job


class ModelInfo(BaseModel):
    """What the front end publishes about a model (/api/tags, /api/show)."""

    architecture: str
    basename: str
    family: str
    context_length: int
    parameter_size: str = ""
    quantization_level: str = ""
    format: str = ""
    size: int = 0
    digest: str
    modified_at: datetime
    template: str = ""
    parameters: dict[str, str | float | int | list[str]] = {}


class BackendSettings(BaseModel):
    """Backend-specific keys of a registry entry; unknown keys are an error."""

    model_config = ConfigDict(extra="forbid")

    def describe(self, model_name: str) -> ModelInfo:  # pragma: no cover - abstract
        raise NotImplementedError


@dataclass
class Outcome:
    reason: Literal["stop", "length"]
    prompt_tokens: int
    completion_tokens: int
    load_ns: int = 0


@dataclass
class NativeCall:
    """A tool call the backend's model made natively (complete)."""

    name: str
    arguments: str  # JSON text
    id: str | None = None


TextGenerator = Generator[Union[str, NativeCall], None, Outcome]


class Backend(ABC):
    name: ClassVar[str]
    Settings: ClassVar[type[BackendSettings]]
    # A backend that reads no prompt (echo) gets the client's messages as sent,
    # instead of the text-only rendering with tool instructions.
    reads_prompt: ClassVar[bool] = True
    # Can pass tools to the model and return its calls (registry tools = "native").
    native_tools: ClassVar[bool] = False
    # The queue (pool) its models use unless the registry says otherwise.
    default_pool: ClassVar[str] = "local"

    def __init__(self, model_name: str, settings: BackendSettings):
        self.model_name = model_name
        self.settings = settings

    @abstractmethod
    def generate(self, job: Job, cancel: Cancel | None = None) -> TextGenerator:
        """Yield text pieces for the job; return its Outcome. The job has
        either chat `messages` or a raw `prompt` (see workers.prompts)."""

    def load(self) -> int:
        """Make the model ready (an empty request); nanoseconds spent."""
        return 0

    def keep_loaded(self, seconds: float | None) -> None:
        """After a job: how long the model may stay loaded while idle
        (None: the backend's default; < 0: forever; 0: unload now)."""
