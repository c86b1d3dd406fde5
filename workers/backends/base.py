"""The backend interface: a model is a class with a name, its registry
settings, and one method that yields text.

`generate(job)` is a generator of text pieces whose return value is an
`Outcome`. The runner owns timing, limits, abort checks and publishing, so a
backend only produces text. Closing the generator must stop generation.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar, Generator, Literal

from pydantic import BaseModel, ConfigDict

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


TextGenerator = Generator[str, None, Outcome]


class Backend(ABC):
    name: ClassVar[str]
    Settings: ClassVar[type[BackendSettings]]
    # A backend that reads no prompt (echo) gets the client's messages as sent,
    # instead of the text-only rendering with tool instructions.
    reads_prompt: ClassVar[bool] = True

    def __init__(self, model_name: str, settings: BackendSettings):
        self.model_name = model_name
        self.settings = settings

    @abstractmethod
    def generate(self, job: Job) -> TextGenerator:
        """Yield text pieces for the job; return its Outcome."""
