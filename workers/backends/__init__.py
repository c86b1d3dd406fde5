"""Backend runtimes by kind name (the kinds' settings and capabilities are
in catalog.kinds). Each module is imported on first use, so a worker that
serves only upstream models never loads llama.cpp."""
from __future__ import annotations

from importlib import import_module

from catalog.kinds import backend_kind
from workers.backends.base import Backend

_RUNTIME_MODULES = {
    "echo": "workers.backends.echo",
    "llamacpp": "workers.backends.llamacpp",
    "openai": "workers.backends.openai_upstream",
    "ollama": "workers.backends.ollama_upstream",
    "anthropic": "workers.backends.anthropic_upstream",
}


def backend_class(name: str) -> type[Backend]:
    backend_kind(name)  # an unknown name raises, listing the known ones
    return import_module(_RUNTIME_MODULES[name]).BACKEND
