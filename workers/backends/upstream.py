"""The base of the upstream backends (OpenAI-compatible, Ollama): one HTTP
client per model per worker process. A subclass gives the request (built by
its dialect's pure mapping, in dialects/) and reads the streamed reply."""
from __future__ import annotations

import httpx

from catalog.upstream import UpstreamSettings
from protocol.contract import Job
from workers.backends.base import Backend
from workers.backends.transport import new_client, open_stream
from workers.cancel import Cancel
from workers.pieces import TextGenerator


class UpstreamBackend(Backend):
    settings: UpstreamSettings

    def __init__(self, model_name: str, settings: UpstreamSettings):
        super().__init__(model_name, settings)
        self._client = new_client(settings)

    def request(self, job: Job) -> tuple[str, dict]:  # pragma: no cover - abstract
        """The path (under base_url) and body for this job: chat or raw prompt."""
        raise NotImplementedError

    def relay(self, response: httpx.Response, cancel: Cancel | None) -> TextGenerator:  # pragma: no cover
        raise NotImplementedError

    def generate(self, job: Job, cancel: Cancel | None = None) -> TextGenerator:
        path, body = self.request(job)
        url = self.settings.base_url.rstrip("/") + path
        with open_stream(self._client, url, body, self.settings, self.model_name, cancel) as response:
            return (yield from self.relay(response, cancel))
