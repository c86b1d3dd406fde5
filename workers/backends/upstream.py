"""The base of the upstream backends (OpenAI-compatible, Ollama, Anthropic): one HTTP
client per model per worker process. A subclass gives the request (built by
its dialect's pure mapping, in dialects/) and reads the streamed reply."""
from __future__ import annotations

import json
from typing import Callable, ClassVar, Iterator

from catalog.upstream import UpstreamSettings
from protocol.contract import EmbedSpec, Job
from protocol.errors import BackendError
from workers.backends.base import Backend
from workers.backends.http_pool import Response
from workers.backends.sse import sse_payloads
from workers.backends.transport import Upstream, new_client, open_stream, probe, watched_arrivals
from workers.backends.upstream_errors import mid_stream_error
from workers.cancel import Cancel
from workers.model_output import Embedded, TextGenerator, flush_texts


class ErrorInStream(Exception):
    """An upstream's error after its 200: Anthropic's `error` event, the Gemini API's error element."""


class UpstreamBackend(Backend):
    settings: UpstreamSettings
    health_path: ClassVar[str]  # a cheap GET that any server of the kind answers (see `healthy`)

    def __init__(self, model_name: str, settings: UpstreamSettings):
        super().__init__(model_name, settings)
        self.upstream = Upstream(new_client(settings), settings, model_name)

    def request(self, job: Job) -> tuple[str, dict]:  # pragma: no cover - abstract
        """The path (under base_url) and body for this job: chat or raw prompt."""
        raise NotImplementedError

    def job_headers(self, job: Job) -> dict[str, str]:
        """Headers of this job's request beside the configured ones."""
        return {}

    def relay(self, response: Response, cancel: Cancel | None) -> TextGenerator:  # pragma: no cover
        raise NotImplementedError

    def relay_fed(self, response: Response, cancel: Cancel | None, feed: Callable[[dict], list]) -> Iterator:
        """Each SSE payload fed to `feed` (one object -> our pieces), for the
        upstreams whose payloads are events of their own (Anthropic's,
        Gemini's). The text of the payloads that arrived together goes on as
        one piece; an ErrorInStream ends the reply after what came before it."""
        try:
            for payloads in sse_payloads(watched_arrivals(response, self.settings, cancel)):
                texts: list[str] = []
                try:
                    for payload in payloads:
                        for piece in feed(payload):
                            if isinstance(piece, str):
                                texts.append(piece)
                            else:
                                yield from flush_texts(texts)
                                yield piece
                except ErrorInStream as error:
                    yield from flush_texts(texts)
                    raise mid_stream_error(self.settings, error) from None
                yield from flush_texts(texts)
        except ValueError:
            raise mid_stream_error(self.settings, "malformed SSE data") from None

    def embed_request(self, spec: EmbedSpec) -> tuple[str, dict]:  # pragma: no cover - abstract
        raise NotImplementedError

    def embed_vectors(self, body: dict) -> tuple[list[list[float]], int]:  # pragma: no cover - abstract
        raise NotImplementedError

    def embed(self, spec: EmbedSpec, cancel: Cancel | None = None) -> Embedded:
        """One request for the whole batch, in the upstream's dialect."""
        path, body = self.embed_request(spec)
        with open_stream(self.upstream, path, body, cancel) as response:
            try:
                vectors, tokens = self.embed_vectors(json.loads(response.read()))
            except (ValueError, KeyError, TypeError, AttributeError):
                vectors, tokens = None, 0
        if vectors is None or len(vectors) != len(spec.tokens if spec.tokens is not None else spec.inputs):
            raise BackendError(f"upstream {self.settings.upstream_name} sent a malformed embeddings reply", 502)
        return Embedded(vectors, tokens)

    def healthy(self) -> bool:
        """Whether the server answers again (after failures)."""
        return probe(self.upstream, self.health_path)

    def generate(self, job: Job, cancel: Cancel | None = None) -> TextGenerator:
        path, body = self.request(job)
        with open_stream(self.upstream, path, body, cancel, self.job_headers(job)) as response:
            return (yield from self.relay(response, cancel))
