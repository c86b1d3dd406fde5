"""The backend instances of one worker process, built on first use per model."""
from __future__ import annotations

import threading

from redis import Redis

from catalog.registry import ModelEntry, Registry
from workers.backends import build_backend
from workers.backends.base import Backend


class ModelBackends:
    def __init__(self, registry: Registry, redis: Redis, worker_id: str):
        self._registry, self._redis, self._worker_id = registry, redis, worker_id
        self._instances: dict[str, Backend] = {}
        self._lock = threading.Lock()

    def entry(self, model: str) -> ModelEntry:
        return self._registry.get(model)

    def get(self, model: str) -> Backend:
        entry = self._registry.get(model)
        with self._lock:
            if entry.name not in self._instances:
                self._instances[entry.name] = build_backend(entry, self._redis, self._worker_id)
            return self._instances[entry.name]
