"""The HTTP transport to an upstream: one POST with its timeouts and
retries, its lines read under a watchdog, and the connection closed when the
job is cancelled.

Timeouts: connect; first token (the upstream may load a model and read a long
prompt); idle between tokens. The last two are kept by a watchdog that shuts
the socket down (httpx has one read timeout per response). Retries happen
only before anything was relayed (connection failures and 502/503/504), with
backoff: tokens are never replayed.

Two httpx/httpcore internals are relied on (pinned by tests in
tests/unit/test_transport.py): httpcore reads `request.extensions["timeout"]`
when it starts reading the body, and exposes the socket through
`response.extensions["network_stream"].get_extra_info("socket")`.
"""
from __future__ import annotations

import logging
import socket
import threading
import time
from contextlib import contextmanager
from typing import Iterator

import httpx

from catalog.upstream import UpstreamSettings
from workers.backends.upstream_errors import cancelled, read_failure, status_error, transport_error, watchdog_timeout
from workers.cancel import Cancel

log = logging.getLogger(__name__)
_RETRYABLE_STATUS = {502, 503, 504}


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
                cancel.on_cancel(lambda: shut_down(response))
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
        raise cancelled()
    if cancel is None:
        time.sleep(delay)


def shut_down(response: httpx.Response) -> None:
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
    watchdog = Watchdog(max(remaining, 0), lambda: shut_down(response))
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
            raise read_failure(error, settings, cancel is not None and cancel.is_set()) from None
    finally:
        watchdog.stop()
    if cancel is not None and cancel.is_set():
        raise cancelled()
    if watchdog.expired:
        raise watchdog_timeout(settings, started)
