"""Registry settings of the upstream backends (`openai`, `ollama`,
`anthropic`, `gemini`): where the upstream is, the model's name there, the variable
holding its key, and the timeouts and retries of the transport."""
from __future__ import annotations

import hashlib
from datetime import datetime, timezone
from urllib.parse import urlparse

from pydantic import Field

from catalog.model_info import BackendSettings, ModelInfo
from catalog.secrets import check_secret_variable, secret_from_env

_STARTED = datetime.now(timezone.utc)


class UpstreamSettings(BackendSettings):
    base_url: str
    upstream_model: str
    api_key_env: str | None = None  # the NAME of the variable holding the key
    headers: dict[str, str] = Field(default_factory=dict)
    drop_params: list[str] = Field(default_factory=list)  # request fields this upstream rejects
    context_length: int = Field(ge=1)
    architecture: str = "upstream"
    connect_timeout: float = Field(default=10, gt=0)
    first_token_timeout: float = Field(default=120, gt=0)
    idle_timeout: float = Field(default=60, gt=0)
    retries: int = Field(default=2, ge=0)
    retry_backoff: float = Field(default=0.5, ge=0)

    @property
    def upstream_name(self) -> str:
        url = urlparse(self.base_url)
        return url.netloc or self.base_url

    def describe(self, model_name: str) -> ModelInfo:
        return ModelInfo(
            architecture=self.architecture,
            basename=self.upstream_model,
            family=self.architecture,
            context_length=self.context_length,
            format="upstream",
            digest=hashlib.sha256(f"{self.base_url}|{self.upstream_model}".encode()).hexdigest(),
            modified_at=_STARTED,
        )

    def check_environment(self) -> None:
        """Without its key every request would fail later with a misleading
        "refused the credentials": refuse to start instead."""
        if self.api_key_env:
            check_secret_variable(self.api_key_env)

    def auth_headers(self) -> dict[str, str]:
        key = secret_from_env(self.api_key_env) if self.api_key_env else None
        return self.headers | ({"Authorization": f"Bearer {key}"} if key else {})


class OpenAISettings(UpstreamSettings):
    """An OpenAI-compatible server; `custom_tools`: it takes OpenAI's custom
    (freeform) tools, grammar included (OpenAI's API does; vLLM, llama.cpp
    and most others do not, and get them as functions of one `input`)."""

    custom_tools: bool = False


class AnthropicSettings(UpstreamSettings):
    """An Anthropic-compatible server (Anthropic's API, or any server of its
    Messages API): its key goes in x-api-key, with the API version it speaks."""

    anthropic_version: str = "2023-06-01"

    def auth_headers(self) -> dict[str, str]:
        key = secret_from_env(self.api_key_env) if self.api_key_env else None
        return self.headers | {"anthropic-version": self.anthropic_version} | ({"x-api-key": key} if key else {})


class GeminiSettings(UpstreamSettings):
    """A server of Google's Gemini API (Google's own, or another Switchboard's
    Gemini routes): its key goes in x-goog-api-key."""

    def auth_headers(self) -> dict[str, str]:
        key = secret_from_env(self.api_key_env) if self.api_key_env else None
        return self.headers | ({"x-goog-api-key": key} if key else {})
