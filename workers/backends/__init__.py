"""Backend runtimes by kind name (the kinds' settings and capabilities are
in catalog.kinds). Each module is imported on first use, so a worker that
serves only upstream models never loads llama.cpp."""
from __future__ import annotations

from importlib import import_module

from redis import Redis

from catalog.deployments import Deployments
from catalog.kinds import backend_kind
from catalog.registry import ModelEntry
from workers.backends.base import Backend
from workers.backends.routed import RoutedUpstream

_RUNTIME_MODULES = {
    "echo": "workers.backends.echo",
    "llamacpp": "workers.backends.llamacpp",
    "openai": "workers.backends.openai_upstream",
    "ollama": "workers.backends.ollama_upstream",
    "anthropic": "workers.backends.anthropic_upstream",
    "gemini": "workers.backends.gemini_upstream",
}


def backend_class(name: str) -> type[Backend]:
    backend_kind(name)  # an unknown name raises, listing the known ones
    return import_module(_RUNTIME_MODULES[name]).BACKEND


def build_backend(entry: ModelEntry, redis: Redis, worker_id: str) -> Backend:
    """A model's backend. An upstream model whose requests are placed by the
    router (several deployments, or a bound) gets one that routes them."""
    settings = entry.settings
    if not isinstance(settings, Deployments):
        return backend_class(entry.backend)(entry.name, settings)
    servers = [backend_class(d.backend)(entry.name, d.settings) for d in settings.deployments]
    if not settings.routed:
        return servers[0]
    return RoutedUpstream(entry.name, settings, servers, redis, worker_id, entry.pool)
