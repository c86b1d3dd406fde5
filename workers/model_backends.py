"""The backend instances of one worker process, built on first use per model."""
from __future__ import annotations

import threading

from catalog.registry import ModelEntry, Registry
from workers.backends import backend_class
from workers.backends.base import Backend


class ModelBackends:
    def __init__(self, registry: Registry):
        self._registry = registry
        self._instances: dict[str, Backend] = {}
        self._lock = threading.Lock()

    def entry(self, model: str) -> ModelEntry:
        return self._registry.get(model)

    def get(self, model: str) -> Backend:
        entry = self._registry.get(model)
        with self._lock:
            if entry.name not in self._instances:
                self._instances[entry.name] = backend_class(entry.backend)(entry.name, entry.settings)
            return self._instances[entry.name]
