"""Keep-alive HTTP/1.1 connections to one upstream server, on the standard
library's http.client, and a streamed response read as its lines arrive.

Why not urllib3 or httpx: a worker makes one upstream request per job, and
both libraries read a chunked reply one chunk (one token) at a time, so a
worker that fell behind runs each token through the relay on its own; side
by side, either costs the worker far more than the 10% of its CPU a streamed
request that a library may cost here (docs/benchmarks-notes.md, "The
upstream HTTP client"). What the upstream transport needs on top of
http.client is small: a pool of idle connections, the request written in
one send, per-phase socket timeouts, the socket to shut down on abort, and
the proxy from the environment (HTTP(S)_PROXY, NO_PROXY), as httpx reads it.
"""
from __future__ import annotations

import base64
import http.client
import socket
import ssl
import threading
import time
import urllib.request
from typing import Callable, Iterator
from urllib.parse import unquote, urlsplit

from workers.backends.chunked import ChunkedDecoder

# Failures of a connection or of a read, as http.client and the socket raise them.
HTTP_ERRORS = (OSError, http.client.HTTPException)
MAX_IDLE = 64  # idle connections kept per upstream (a worker runs up to its slots at once)
_BLOCK = 65536  # the most a streamed body's read returns at once
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, ConnectionAbortedError)


class Response:
    """A response whose body is read as it arrives. `close` gives the
    connection back for the next request when the body was read to its end."""

    def __init__(self, pool: "ConnectionPool", connection: http.client.HTTPConnection, sock: socket.socket,
                 raw: http.client.HTTPResponse, elapsed_before_body: float):
        # The socket the request went out on: timeouts and shutdown act on it.
        self._pool, self._connection, self._socket, self._raw = pool, connection, sock, raw
        self.status_code = raw.status
        self.headers = raw.headers  # case-insensitive .get
        self.elapsed_before_body = elapsed_before_body
        self._shut = False
        self._chunks = ChunkedDecoder()  # a chunked body is decoded here, not by http.client

    def set_read_timeout(self, seconds: float) -> None:
        self._socket.settimeout(seconds)

    def arrivals(self, time_left: Callable[[], float] | None = None) -> Iterator[list[str]]:
        """The body's lines, without their line ends, as they arrive: each
        item is the lines that one read completed (everything that had
        arrived: a worker that fell behind takes a burst of tokens at once).
        Split here: http.client's readline peeks and copies in Python for
        every line, and an SSE stream is two lines an event. With
        `time_left`, each read waits at most the seconds it returns
        (TimeoutError once none are left)."""
        read, left = (self._read_chunked if self._raw.chunked else self._raw.read1), b""
        while True:
            if time_left is not None:
                self._wait_at_most(time_left())
            if not (block := read(_BLOCK)):
                break
            *complete, left = (left + block).split(b"\n")
            if complete:
                yield [line.decode("utf-8", errors="replace").rstrip("\r") for line in complete]
        if left:
            yield [left.decode("utf-8", errors="replace").rstrip("\r")]

    def _read_chunked(self, size: int) -> bytes:
        """What has arrived of a chunked body (see chunked.py), after at
        most one wait; b"" at its end."""
        while not self._chunks.done:
            data = self._raw.fp.read1(size)  # what is buffered, else one receive
            if not data:
                raise http.client.IncompleteRead(b"")
            if body := self._chunks.feed(data):
                return body
        return b""

    def _wait_at_most(self, seconds: float) -> None:
        if seconds <= 0:  # a timeout of 0 would make the socket non-blocking
            raise TimeoutError("the time to read is up")
        self._socket.settimeout(seconds)

    def read(self, limit: int | None = None) -> bytes:
        return self._raw.read(limit)

    def shut_down(self) -> None:
        """From another greenlet or thread: wake a blocked read (it ends at
        once) and drop the connection, so the upstream stops generating."""
        self._shut = True
        shut_down_socket(self._socket)

    def close(self) -> None:
        ended = self._raw.isclosed() or (self._chunks.done and not self._chunks.extra)
        reusable = ended and not self._raw.will_close and not self._shut
        self._raw.close()
        if reusable:
            self._pool.keep(self._connection)
        else:
            self._connection.close()


class ConnectionPool:
    """Connections to the server of `base_url` (directly, or through the
    environment's proxy for it). Thread- and greenlet-safe."""

    def __init__(self, base_url: str, connect_timeout: float):
        url = urlsplit(base_url)
        self._https = url.scheme == "https"
        self._host = url.hostname or ""
        self._port = url.port or (443 if self._https else 80)
        self._origin = f"{url.scheme}://{url.netloc}"
        self._host_header = url.netloc.rpartition("@")[2]
        self._base_path = url.path.rstrip("/")
        self.address, self.base_path = self._host_header, self._base_path  # for traces
        self._connect_timeout = connect_timeout
        self._proxy, self._proxy_headers = _proxy_for(url.scheme, self._host)
        self._context = ssl.create_default_context() if self._https else None
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def post(self, path: str, body: bytes, headers: dict[str, str], header_timeout: float, on_connect) -> Response:
        """POST to `path` under the base URL and read the status and headers
        (within `header_timeout`).
        `on_connect(shut_down)` is called with the connection's shutdown as
        soon as it exists. A kept connection the server closed meanwhile is
        replaced once, transparently: nothing was answered on it."""
        return self._send(path, body, headers, header_timeout, on_connect)

    def get(self, path: str, headers: dict[str, str], timeout: float) -> Response:
        return self._send(path, None, headers, timeout, lambda shut_down: None)

    def _send(self, path: str, body: bytes | None, headers: dict[str, str], header_timeout: float,
              on_connect) -> Response:
        """`post`, or a GET when there is no body."""
        connection, reused = self._take()
        while True:
            try:
                return self._exchange(connection, path, body, headers, header_timeout, on_connect)
            except _STALE:
                connection.close()
                if not reused:
                    raise
                connection, reused = self._new(), False
            except BaseException:
                connection.close()
                raise

    def _exchange(self, connection, path, body, headers, header_timeout, on_connect) -> Response:
        """http.client's connection only connects (TCP, the proxy's tunnel,
        TLS): the request is written here, headers and body in one send (its
        own `request` takes two system calls), and the reply is parsed by
        http.client's response class."""
        if connection.sock is None:
            connection.connect()
        sock = connection.sock
        on_connect(lambda: shut_down_socket(sock))
        sock.settimeout(self._connect_timeout)  # sending
        sock.sendall(self._request(path, body, headers))
        sent_at = time.monotonic()
        sock.settimeout(header_timeout)
        raw = http.client.HTTPResponse(sock, method="GET" if body is None else "POST")
        try:
            raw.begin()
        except BaseException:
            raw.close()
            raise
        return Response(self, connection, sock, raw, time.monotonic() - sent_at)

    def _request(self, path: str, body: bytes | None, headers: dict[str, str]) -> bytes:
        if self._proxy and not self._https:
            headers = headers | self._proxy_headers
        lines = [f"{'GET' if body is None else 'POST'} {self._target(path)} HTTP/1.1", f"Host: {self._host_header}",
                 *([] if body is None else [f"Content-Length: {len(body)}"]), "Accept-Encoding: identity"]
        for name, value in headers.items():
            if any(c in name + value for c in "\r\n\0") or ":" in name:
                raise ValueError(f"the upstream header {name!r} is not a valid header")  # never its value
            lines.append(f"{name}: {value}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")

    def keep(self, connection: http.client.HTTPConnection) -> None:
        with self._lock:
            if len(self._idle) < MAX_IDLE:
                self._idle.append(connection)
                return
        connection.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()

    def _take(self) -> tuple[http.client.HTTPConnection, bool]:
        with self._lock:
            if self._idle:
                return self._idle.pop(), True
        return self._new(), False

    def _new(self) -> http.client.HTTPConnection:
        host, port = self._proxy or (self._host, self._port)
        if self._https:
            connection = http.client.HTTPSConnection(host, port, timeout=self._connect_timeout,
                                                     context=self._context)
            if self._proxy:
                connection.set_tunnel(self._host, self._port, headers=self._proxy_headers)
        else:
            connection = http.client.HTTPConnection(host, port, timeout=self._connect_timeout)
        return connection

    def _target(self, path: str) -> str:
        """A plain-HTTP proxy is sent the absolute URL; everything else, the path."""
        path = self._base_path + path
        return self._origin + path if self._proxy and not self._https else path


def shut_down_socket(sock: socket.socket | None) -> None:
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _proxy_for(scheme: str, host: str) -> tuple[tuple[str, int] | None, dict[str, str]]:
    """The environment's proxy for this scheme and host, as httpx and curl
    read it, and its credentials' header if the proxy's URL has them."""
    proxy = urllib.request.getproxies().get(scheme)
    if not proxy or urllib.request.proxy_bypass(host):
        return None, {}
    url = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    headers = {}
    if url.username is not None:
        credentials = f"{unquote(url.username)}:{unquote(url.password or '')}".encode()
        headers["Proxy-Authorization"] = "Basic " + base64.b64encode(credentials).decode()
    return (url.hostname or "", url.port or 80), headers
