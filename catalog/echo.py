"""Registry settings of the `echo` backend (deterministic replies)."""
from __future__ import annotations

import hashlib
from datetime import datetime, timezone

from pydantic import Field

from catalog.model_info import BackendSettings, ModelInfo

_STARTED = datetime(2026, 1, 1, tzinfo=timezone.utc)


class EchoSettings(BackendSettings):
    delay_ms: float = Field(default=0, ge=0, description="pause between tokens")
    context_length: int = Field(default=131072, ge=1)
    embedding_length: int = Field(default=256, ge=2, description="the length of its (hashed bag-of-words) vectors")

    def describe(self, model_name: str) -> ModelInfo:
        return ModelInfo(
            architecture="echo",
            basename=model_name.split(":")[0],
            family="echo",
            context_length=self.context_length,
            parameter_size="0",
            format="none",
            digest=hashlib.sha256(f"echo/{model_name}/{self.delay_ms}".encode()).hexdigest(),
            modified_at=_STARTED,
            template="{{ .Prompt }}",
        )
