"""What the upstream backends (OpenAI-compatible, Ollama) share: registry
settings, the HTTP request with its timeouts and retries, error mapping,
and closing the connection when the job is cancelled.

Timeouts: connect; first token (the upstream may load a model and read a long
prompt); idle between tokens. The last two are kept by a watchdog that shuts
the socket down (httpx has one read timeout per response). Retries happen only before anything was relayed
(connection failures and 502/503/504), with backoff: tokens are never replayed.
Errors name the upstream by host, never by key.
"""
from __future__ import annotations

import hashlib
import logging
import socket
import threading
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Iterator
from urllib.parse import urlparse

import httpx
from pydantic import Field

from queue_config import secret_from_env
from workers.backends.base import Backend, BackendSettings, ModelInfo, TextGenerator
from workers.cancel import Cancel
from workers.contract import Job, ToolSpec
from workers.exceptions import BackendError

log = logging.getLogger(__name__)
_RETRYABLE_STATUS = {502, 503, 504}
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

    def auth_headers(self) -> dict[str, str]:
        key = secret_from_env(self.api_key_env) if self.api_key_env else None
        return self.headers | ({"Authorization": f"Bearer {key}"} if key else {})


def tool_definitions(tools: list[ToolSpec]) -> list[dict]:
    """The OpenAI shape of tool definitions, which Ollama shares."""
    return [{"type": "function", "function": {
        "name": t.name, "description": t.description, "parameters": t.parameters or {"type": "object"}}}
        for t in tools]


def _retry_after(response: httpx.Response) -> int | None:
    value = response.headers.get("retry-after", "")
    return int(value) if value.isdigit() else None


def _upstream_message(response: httpx.Response) -> str:
    try:
        response.read()
        body = response.json()
        error = body.get("error", body) if isinstance(body, dict) else body
        message = error.get("message", error) if isinstance(error, dict) else error
        return str(message)[:500]
    except (ValueError, httpx.HTTPError):
        return response.text[:500] if response.is_closed else ""


def status_error(response: httpx.Response, settings: UpstreamSettings, model: str) -> BackendError:
    """An upstream's refusal, as the status our client should see."""
    name, status = settings.upstream_name, response.status_code
    if status in (401, 403):
        return BackendError(f"upstream {name} refused the credentials configured for it (HTTP {status})", 502)
    if status == 404:
        return BackendError(f'model "{model}" was not found at upstream {name} '
                            f'(as "{settings.upstream_model}"): {_upstream_message(response)}', 404)
    if status in (429, 503):
        return BackendError(f"upstream {name} is busy (HTTP {status}); try again later", 503, _retry_after(response))
    if 400 <= status < 500:
        return BackendError(f"upstream {name} rejected the request (HTTP {status}): {_upstream_message(response)}", 400)
    return BackendError(f"upstream {name} failed (HTTP {status})", 502)


def transport_error(error: httpx.HTTPError, settings: UpstreamSettings) -> BackendError:
    name = settings.upstream_name
    if isinstance(error, httpx.TimeoutException):
        return BackendError(f"upstream {name} timed out ({type(error).__name__})", 504)
    return BackendError(f"cannot reach upstream {name}: {type(error).__name__}", 502)


def new_client(settings: UpstreamSettings) -> httpx.Client:
    # Many upstreams (Ollama) send headers only with the first token: the read
    # timeout for the headers is the first-token timeout. For the body it is
    # raised to a backstop (see _body_timeout); the watchdog keeps the real ones.
    timeout = httpx.Timeout(connect=settings.connect_timeout, read=settings.first_token_timeout,
                            write=settings.connect_timeout, pool=settings.connect_timeout)
    return httpx.Client(timeout=timeout, follow_redirects=False)


@contextmanager
def open_stream(client: httpx.Client, url: str, body: dict, settings: UpstreamSettings, model: str,
                cancel: Cancel | None) -> Iterator[httpx.Response]:
    """POST and yield the streaming response (status 200), retrying what can
    be retried; the connection closes on exit and on cancellation."""
    body = {k: v for k, v in body.items() if k not in settings.drop_params}
    for attempt in range(settings.retries + 1):
        last = attempt == settings.retries
        try:
            request = client.build_request("POST", url, json=body, headers=settings.auth_headers())
            sent_at = time.monotonic()
            response = client.send(request, stream=True)
            response.elapsed_before_body = time.monotonic() - sent_at
            _body_timeout(request, settings)
        except httpx.HTTPError as error:
            if last or (cancel is not None and cancel.is_set()):
                raise transport_error(error, settings) from None
            _backoff(settings, attempt, cancel, error)
            continue
        if response.status_code in _RETRYABLE_STATUS and not last:
            response.close()
            _backoff(settings, attempt, cancel, f"HTTP {response.status_code}")
            continue
        try:
            if response.status_code != 200:
                raise status_error(response, settings, model)
            if cancel is not None:
                cancel.on_cancel(lambda: _shut_down(response))
            yield response
            return
        finally:
            response.close()


def _body_timeout(request: httpx.Request, settings: UpstreamSettings) -> None:
    """httpcore reads the read timeout from this dict when it starts reading
    the body, so it can be raised between the headers and the body."""
    request.extensions["timeout"] = dict(request.extensions.get("timeout", {}),
                                         read=settings.first_token_timeout + settings.idle_timeout)


def _backoff(settings: UpstreamSettings, attempt: int, cancel: Cancel | None, reason) -> None:
    delay = settings.retry_backoff * (2 ** attempt)
    log.warning("upstream %s: %s; retry %d in %.1f s", settings.upstream_name, reason, attempt + 1, delay)
    if cancel is not None and cancel.wait(delay):
        raise BackendError("cancelled", 499)
    if cancel is None:
        time.sleep(delay)


def _shut_down(response: httpx.Response) -> None:
    """Called from the abort listener: wake the worker's blocked read and
    drop the connection, so the upstream stops generating too."""
    stream = response.extensions.get("network_stream")
    sock = stream.get_extra_info("socket") if stream is not None else None
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class Watchdog:
    """Calls `on_expire` once if `extend` is not called before the deadline."""

    def __init__(self, timeout: float, on_expire):
        self._deadline = time.monotonic() + timeout
        self._on_expire = on_expire
        self._moved_earlier = threading.Event()
        self._stopped = False
        self.expired = False
        threading.Thread(target=self._run, name="upstream-watchdog", daemon=True).start()

    def extend(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        earlier = deadline < self._deadline
        self._deadline = deadline
        if earlier:  # the first token switches to the (usually shorter) idle timeout
            self._moved_earlier.set()

    def stop(self) -> None:
        self._stopped = True
        self._moved_earlier.set()

    def _run(self) -> None:
        while not self._stopped:
            remaining = self._deadline - time.monotonic()
            if remaining <= 0:
                self.expired = True
                self._on_expire()
                return
            self._moved_earlier.wait(remaining)
            self._moved_earlier.clear()


def watched_lines(response: httpx.Response, settings: UpstreamSettings, cancel: Cancel | None) -> Iterator[str]:
    """The response's lines, under the first-token and idle timeouts. Ends
    with the right error when the stream was cut by a timeout, a
    cancellation or a broken connection."""
    # Headers took part of the first-token time; the rest is the watchdog's.
    remaining = settings.first_token_timeout - response.elapsed_before_body
    watchdog = Watchdog(max(remaining, 0), lambda: _shut_down(response))
    started = False
    try:
        for line in response.iter_lines():
            if line.strip() and not line.startswith(":"):  # SSE comments are keep-alives, not tokens
                started = True
            if started:
                watchdog.extend(settings.idle_timeout)
            if watchdog.expired:
                break
            yield line
    except httpx.HTTPError as error:
        if not watchdog.expired:
            raise read_failure(error, settings, cancel) from None
    finally:
        watchdog.stop()
    if cancel is not None and cancel.is_set():
        raise BackendError("cancelled", 499)
    if watchdog.expired:
        if not started:
            raise BackendError(f"upstream {settings.upstream_name} sent no token within "
                               f"{settings.first_token_timeout:g} s (timed out)", 504)
        raise BackendError(f"upstream {settings.upstream_name} stopped sending tokens for "
                           f"{settings.idle_timeout:g} s (timed out)", 504)


def mid_stream_error(settings: UpstreamSettings, detail) -> BackendError:
    return BackendError(f"upstream {settings.upstream_name} failed mid-stream: {str(detail)[:300]}", 502)


def read_failure(error: httpx.HTTPError, settings: UpstreamSettings, cancel: Cancel | None) -> BackendError:
    if cancel is not None and cancel.is_set():
        return BackendError("cancelled", 499)
    if isinstance(error, httpx.TimeoutException):
        return BackendError(f"upstream {settings.upstream_name} stopped sending tokens (timed out)", 504)
    return BackendError(f"upstream {settings.upstream_name} broke off the stream ({type(error).__name__})", 502)


class UpstreamBackend(Backend):
    """Base of the upstream backends: one HTTP client per model per worker
    process; subclasses give the path, the request body and the stream reader."""

    Settings = UpstreamSettings
    settings: UpstreamSettings
    native_tools = True
    default_pool = "upstream"

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
