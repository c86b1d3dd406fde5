"""What a backend yields, shared by the backends and the tool-call layer:
text pieces, complete native tool calls, and the outcome it returns."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Generator, Iterator, Union

from protocol.events import FinishReason


@dataclass
class Outcome:
    reason: FinishReason  # STOP or LENGTH
    prompt_tokens: int
    completion_tokens: int
    load_ns: int = 0
    cached_tokens: int | None = None  # prompt tokens found evaluated (None: the backend keeps no prompt cache)
    stop_sequence: str | None = None  # the client's stop sequence that ended it, if the backend can tell
    reasoning_tokens: int | None = None  # of completion_tokens, spent thinking (None: the backend cannot tell)


@dataclass
class Embedded:
    """An embedding job's result: a vector per input, as the model made it."""

    vectors: list[list[float]]
    prompt_tokens: int
    load_ns: int = 0


@dataclass
class NativeCall:
    """A tool call the backend's model made natively (complete)."""

    name: str
    arguments: str  # JSON text
    id: str | None = None


@dataclass
class Thinking:
    """Reasoning text: an upstream's thinking field, or a local model's text
    between its think tags (see workers/thinking.py); an Anthropic upstream
    signs it at its end."""

    text: str
    signature: str | None = None


@dataclass
class RedactedThinking:
    """An Anthropic upstream's encrypted thinking block (opaque data)."""

    data: str


@dataclass
class Prompted:
    """The prompt's size, yielded before the first token by a backend that
    knows it then (its Outcome still reports it at the end)."""

    prompt_tokens: int
    cached_tokens: int | None = None


TextGenerator = Generator[Union[str, NativeCall, Thinking, RedactedThinking, Prompted], None, Outcome]


def flush_texts(texts: list[str]) -> Iterator[str]:
    """The text pieces collected so far, as one piece (and the list emptied):
    pieces that arrived together go through the filters and the publisher
    once."""
    if texts:
        yield "".join(texts)
        texts.clear()
