"""How a model is described to clients, and the base of a backend kind's
registry settings."""
from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, ValidationError


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
    parallel: int = 1  # jobs one worker serves at once, each with context_length of its own


class BackendSettings(BaseModel):
    """Backend-specific keys of a registry entry; unknown keys are an error."""

    model_config = ConfigDict(extra="forbid")

    def describe(self, model_name: str) -> ModelInfo:  # pragma: no cover - abstract
        raise NotImplementedError

    def jobs_at_once(self) -> int:
        """For a kind that runs a bounded number of jobs per worker process
        (catalog.kinds, `serial`): how many, its spare places among them."""
        return 1

    def spare_places(self) -> int:
        """Of jobs_at_once, how many are kept for a person with no job running
        on the copy (fair_take.lua's copy_verdict)."""
        return 0

    def check_environment(self) -> None:
        """Raise ValueError if what the settings name outside the registry
        (a file, an environment variable) is missing: checked at start-up."""


def validation_message(error: ValidationError) -> str:
    """A registry entry's problems, each after the key it is about."""
    return "; ".join(f'{".".join(str(p) for p in e["loc"]) or "entry"}: {e["msg"].removeprefix("Value error, ")}'
                     for e in error.errors())
