"""The HTTP transport to an upstream: one POST with its timeouts and
retries, its lines read under the first-token and idle deadlines, and the
connection closed when the job is cancelled (on http.client: see
http_pool.py for why).

Timeouts: connect (and send); first token (the upstream may load a model and
read a long prompt); idle between tokens. The socket's own timeout is the
first-token timeout while waiting for the headers (many upstreams, Ollama
among them, send them only with the first token); while the body streams,
it is set before every read to the time left until the deadline (see
watched_arrivals), and is a backstop for a body read whole. Retries happen only
before anything was relayed (connection failures and 502/503/504), with
backoff: tokens are never replayed.
"""
from __future__ import annotations

import json
import logging
import time
from contextlib import contextmanager
from typing import Iterator, NamedTuple

from catalog.upstream import UpstreamSettings
from telemetry import tracing
from workers.backends.http_pool import HTTP_ERRORS, ConnectionPool, Response
from workers.backends.upstream_errors import cancelled, read_failure, status_error, transport_error, watchdog_timeout
from workers.cancel import Cancel

log = logging.getLogger(__name__)
_RETRYABLE_STATUS = {502, 503, 504, 529}  # 529: Anthropic's "overloaded"
USER_AGENT = "switchboard"


def new_client(settings: UpstreamSettings) -> ConnectionPool:
    return ConnectionPool(settings.base_url, settings.connect_timeout)


class Upstream(NamedTuple):
    """An upstream server as one model reaches it."""
    client: ConnectionPool
    settings: UpstreamSettings
    model: str  # the model's name here (in errors)


@contextmanager
def open_stream(upstream: Upstream, path: str, body: dict, cancel: Cancel | None,
                job_headers: dict[str, str] | None = None) -> Iterator[Response]:
    """POST to `path` (under the upstream's base URL) and yield the streaming
    response (status 200), retrying what can be retried; the connection
    closes on exit (or goes back to the pool, its body read) and on
    cancellation, at once, even while waiting for the headers."""
    client, settings, model = upstream
    payload = json.dumps({k: v for k, v in body.items() if k not in settings.drop_params}).encode()
    headers = {"Content-Type": "application/json", "Accept": "*/*", "User-Agent": USER_AGENT,
               **(job_headers or {}), **settings.auth_headers()}
    on_connect = cancel.on_cancel if cancel is not None else (lambda shut_down: None)
    for attempt in range(settings.retries + 1):
        last = attempt == settings.retries
        with tracing.client_span("POST", client.address, client.base_path + path) as call:  # one span per attempt
            try:
                response = client.post(path, payload, headers | call.headers, settings.first_token_timeout, on_connect)
                response.set_read_timeout(settings.first_token_timeout + settings.idle_timeout)  # a body read whole
            except HTTP_ERRORS as error:
                if cancel is not None and cancel.is_set():
                    raise cancelled() from None
                if last:
                    raise transport_error(error, settings) from None
                retry = type(error).__name__
            else:
                tracing.annotate(call.span, {"http.response.status_code": response.status_code})
                retry = f"HTTP {response.status_code}" if response.status_code in _RETRYABLE_STATUS and not last \
                    else None
                try:
                    if retry is None and response.status_code != 200:
                        raise status_error(response, settings, model)
                    if retry is None:
                        yield response
                        return
                finally:
                    response.close()
            tracing.annotate(call.span, {"error.type": retry})
        _backoff(settings, attempt, cancel, retry)


def probe(upstream: Upstream, path: str) -> bool:
    """Whether the server answers at all (any status below 500) within its
    connect timeout: how a rested deployment is found back."""
    client, settings, _ = upstream
    try:
        response = client.get(path, {"User-Agent": USER_AGENT, **settings.auth_headers()}, settings.connect_timeout)
    except HTTP_ERRORS:
        return False
    try:
        return response.status_code < 500
    finally:
        response.close()


def _backoff(settings: UpstreamSettings, attempt: int, cancel: Cancel | None, reason) -> None:
    delay = settings.retry_backoff * (2 ** attempt)
    log.warning("upstream %s: %s; retry %d in %.1f s", settings.upstream_name, reason, attempt + 1, delay)
    if cancel is not None and cancel.wait(delay):
        raise cancelled()
    if cancel is None:
        time.sleep(delay)


class Deadline:
    """When the wait for the stream's next line is up: the first-token
    deadline, then each line moves it to the idle timeout from now."""

    def __init__(self, seconds: float):
        self._at = time.monotonic() + seconds

    def extend(self, seconds: float) -> None:
        self._at = time.monotonic() + seconds

    def left(self) -> float:
        return self._at - time.monotonic()


def watched_arrivals(response: Response, settings: UpstreamSettings,
                     cancel: Cancel | None) -> Iterator[list[str]]:
    """The response's lines as they arrive (Response.arrivals), under the
    first-token and idle timeouts. Each read waits at most until the
    deadline (the socket's read timeout is set to the time left before every
    read), so a read that times out is the deadline passing, and no timer
    runs beside the stream (a watchdog thread per job cost about 0.1 ms of a
    job's CPU). Ends with the right error when the stream was cut by a
    timeout, a cancellation or a broken connection."""
    # Headers took part of the first-token time; the rest is the deadline's.
    deadline = Deadline(settings.first_token_timeout - response.elapsed_before_body)
    started = False
    try:
        for lines in response.arrivals(deadline.left):
            # SSE comments are keep-alives, not tokens
            started = started or any(line.strip() and not line.startswith(":") for line in lines)
            if started:
                deadline.extend(settings.idle_timeout)
            yield lines
    except TimeoutError:
        if cancel is not None and cancel.is_set():
            raise cancelled() from None
        raise watchdog_timeout(settings, started) from None
    except HTTP_ERRORS as error:
        raise read_failure(error, settings, cancel is not None and cancel.is_set()) from None
    if cancel is not None and cancel.is_set():
        raise cancelled()
