"""Backends registered by name.

The registry maps a backend's name to its module, imported on first use, so
that reading the model registry (front end) never loads model libraries.
"""
from __future__ import annotations

from importlib import import_module

from workers.backends.base import Backend
from workers.exceptions import UnknownBackend

_BACKEND_MODULES = {
    "echo": "workers.backends.echo",
    "llamacpp": "workers.backends.llamacpp",
    "openai": "workers.backends.openai_upstream",
    "ollama": "workers.backends.ollama_upstream",
}


def backend_names() -> list[str]:
    return sorted(_BACKEND_MODULES)


def backend_class(name: str) -> type[Backend]:
    if name not in _BACKEND_MODULES:
        raise UnknownBackend(name, backend_names())
    return import_module(_BACKEND_MODULES[name]).BACKEND
