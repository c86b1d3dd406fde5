"""The servers behind an upstream model (its deployments): one or several,
each with the settings of a single upstream (catalog/upstream.py), its kind,
its weight and how many requests it takes at once.

    [models."coder"]
    backend = "openai"                 # the deployments' kind unless one says otherwise
    upstream_model = "qwen2.5-coder"   # keys beside `deployments` are every deployment's defaults
    context_length = 32768
    deployments = [
      { base_url = "http://gpu1:8000/v1", max_concurrent = 8 },
      { base_url = "http://gpu2:11434", backend = "ollama", weight = 2 },
    ]

An entry without `deployments` is a list of one (the entry itself). The
model reports the smallest context of its deployments, so a prompt that fits
one fits all. workers/backends/routed.py picks one per request.
"""
from __future__ import annotations

import hashlib
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from catalog.model_info import BackendSettings, ModelInfo, validation_message
from catalog.upstream import AnthropicSettings, GeminiSettings, OpenAISettings, UpstreamSettings

SETTINGS_OF_KIND: dict[str, type[UpstreamSettings]] = {
    "openai": OpenAISettings, "ollama": UpstreamSettings, "anthropic": AnthropicSettings, "gemini": GeminiSettings}
_SHARED_ROUTING_KEYS = {"weight", "max_concurrent"}  # a deployment's, with the model's as the default
_MODEL_KEYS = {"deployments", "cooldown", "max_cooldown", "affinity_wait"}


class Deployment(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str  # in metrics, the console and logs: its `name`, else its host
    backend: str
    weight: float = Field(default=1, gt=0)  # its share of the requests, under load
    max_concurrent: int | None = Field(default=None, ge=1)  # requests it takes at once (None: no bound)
    settings: UpstreamSettings


class Deployments(BackendSettings):
    """An upstream model's settings: its deployments; how long a failed
    one rests (`cooldown` seconds, doubled after each failure in a row, at
    most `max_cooldown`; an upstream's Retry-After is honoured); and how
    long a session's turn waits for the deployment holding its conversation
    while that one is full (`affinity_wait` seconds, 0: not at all) before
    it goes to another, which reads the whole conversation again."""

    kind: ClassVar[str] = "openai"
    deployments: tuple[Deployment, ...] = Field(min_length=1)
    cooldown: float = Field(default=5, gt=0)
    max_cooldown: float = Field(default=300, gt=0)
    affinity_wait: float = Field(default=1, ge=0)

    @model_validator(mode="before")
    @classmethod
    def _from_registry_table(cls, table: Any) -> Any:
        if not isinstance(table, dict) or all(isinstance(d, Deployment) for d in table.get("deployments", [None])):
            return table
        shared = {k: v for k, v in table.items() if k not in _MODEL_KEYS}
        alone = [{k: shared.pop(k) for k in ("name",) if k in shared}]  # the entry itself, under its `name`
        listed = table["deployments"] if "deployments" in table else alone
        if not isinstance(listed, list) or not listed:
            raise ValueError("deployments: must be a non-empty list of tables (each with at least base_url)")
        _check_shared_keys(shared)
        deployments = [_deployment(cls.kind, shared, own, i, len(listed) > 1) for i, own in enumerate(listed)]
        _check_unique_names(deployments)
        return {k: v for k, v in table.items() if k in _MODEL_KEYS} | {"deployments": deployments}

    @property
    def routed(self) -> bool:
        """Whether requests are placed by the router (and counted per
        deployment): several deployments, or a bound on one."""
        return len(self.deployments) > 1 or self.deployments[0].max_concurrent is not None

    @property
    def bounded(self) -> bool:
        """Every deployment takes a bounded number of requests: jobs wait in
        the queue while all are full."""
        return all(d.max_concurrent is not None for d in self.deployments)

    def describe(self, model_name: str) -> ModelInfo:
        info = self.deployments[0].settings.describe(model_name)
        places = "|".join(f"{d.settings.base_url}|{d.settings.upstream_model}" for d in self.deployments)
        return info.model_copy(update={"context_length": min(d.settings.context_length for d in self.deployments),
                                       "digest": hashlib.sha256(places.encode()).hexdigest()})

    def check_environment(self) -> None:
        for deployment in self.deployments:
            deployment.settings.check_environment()


def _check_shared_keys(shared: dict) -> None:
    known = set().union(*(s.model_fields for s in SETTINGS_OF_KIND.values())) | _SHARED_ROUTING_KEYS
    unknown = sorted(set(shared) - known)
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r} (an upstream model takes the settings of an upstream, "
                         f"{', '.join(sorted(_SHARED_ROUTING_KEYS | _MODEL_KEYS))})")


def _deployment(default_kind: str, shared: dict, own: Any, index: int, several: bool) -> Deployment:
    """With several deployments, a failed request moves to the next one at
    once rather than retrying the same server (unless `retries` says so)."""
    where = f"deployments[{index}]"
    if not isinstance(own, dict):
        raise ValueError(f"{where}: must be a table")
    kind = own.get("backend", default_kind)
    if kind not in SETTINGS_OF_KIND:
        raise ValueError(f"{where}: backend {kind!r} is not an upstream kind (known: {', '.join(SETTINGS_OF_KIND)})")
    settings_class = SETTINGS_OF_KIND[kind]
    inherited = {k: v for k, v in shared.items() if k in settings_class.model_fields or k in _SHARED_ROUTING_KEYS}
    merged = {"retries": 0} if several else {}
    merged |= inherited | {k: v for k, v in own.items() if k != "backend"}
    routing = {k: merged.pop(k) for k in (*_SHARED_ROUTING_KEYS, "name") if k in merged}
    try:
        settings = settings_class.model_validate(merged)
        return Deployment(backend=kind, settings=settings, **{"name": settings.upstream_name} | routing)
    except ValidationError as error:
        raise ValueError(f"{where}: {validation_message(error)}") from None


def _check_unique_names(deployments: list[Deployment]) -> None:
    names = [d.name for d in deployments]
    twice = next((name for name in names if names.count(name) > 1), None)
    if twice is not None:
        raise ValueError(f"two deployments are named {twice!r}: give each a distinct `name`")


class OllamaDeployments(Deployments):
    kind: ClassVar[str] = "ollama"


class AnthropicDeployments(Deployments):
    kind: ClassVar[str] = "anthropic"


class GeminiDeployments(Deployments):
    kind: ClassVar[str] = "gemini"
