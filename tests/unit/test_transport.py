"""The upstream transport's HTTP layer (workers/backends/http_pool.py and
transport.open_stream) against small socket servers that script each reply:
per-phase timeouts, shutting a read down, keep-alive reuse, a kept
connection the server closed, the environment's proxy."""
from __future__ import annotations

import socket
import threading
import time

import pytest

from catalog.upstream import UpstreamSettings
from protocol.errors import BackendError
from workers.backends.http_pool import ConnectionPool
from workers.backends.transport import Upstream, open_stream, watched_arrivals
from workers.cancel import Cancel

DELAY = 0.6
OK = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\n"


class Server:
    """Accepts connections; `answer(connection, request)` replies to each
    request (a connection may carry several). Records what arrived."""

    def __init__(self, answer):
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen()
        self.port = self.listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.requests: list[bytes] = []
        self.connections = 0
        self._answer = answer
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while not self.stop.is_set():
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._talk, args=(connection,), daemon=True).start()

    def _talk(self, connection):
        with connection:
            while True:
                request = _read_request(connection)
                if request is None:
                    return
                self.requests.append(request)
                try:
                    if self._answer(connection, request) == "close":
                        return
                except OSError:
                    return

    def close(self):
        self.stop.set()
        self.listener.close()


def _read_request(connection) -> bytes | None:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = connection.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    while len(body) < length:
        body += connection.recv(65536)
    return data


@pytest.fixture
def serve():
    servers = []

    def start(answer):
        servers.append(Server(answer))
        return servers[-1]
    yield start
    for server in servers:
        server.close()


def _post(pool, header_timeout=5.0, on_connect=lambda shut_down: None):
    return pool.post("/v1/x", b"{}", {"Content-Type": "application/json"}, header_timeout, on_connect)


def late_body(connection, request):
    connection.sendall(OK)
    time.sleep(DELAY)
    connection.sendall(b"late\n")


def test_the_header_timeout_then_the_body_timeout_apply(serve):
    server = serve(late_body)
    pool = ConnectionPool(server.url, 5)
    response = _post(pool, header_timeout=0.2)  # the headers come at once
    with pytest.raises(TimeoutError):  # the headers' timeout, unchanged, is too short for the body
        response.read()
    response.close()
    response = _post(pool, header_timeout=0.2)
    response.set_read_timeout(2)
    assert response.read() == b"late\n"
    response.close()


def test_shutting_the_connection_down_wakes_a_blocked_read_at_once(serve):
    server = serve(late_body)
    response = _post(ConnectionPool(server.url, 5))
    threading.Timer(0.1, response.shut_down).start()
    started = time.monotonic()
    with pytest.raises(Exception):  # noqa: B017 - a short read, however http.client names it
        response.read()
    assert time.monotonic() - started < DELAY  # woken by the shutdown, not by the body
    response.close()


def test_a_connection_read_to_its_end_is_reused_and_one_left_unread_is_not(serve):
    server = serve(lambda connection, request: connection.sendall(OK + b"hello"))
    pool = ConnectionPool(server.url + "/base/", 5)
    for _ in range(3):
        response = _post(pool)
        assert response.read() == b"hello"
        response.close()
    assert server.connections == 1 and all(r.startswith(b"POST /base/v1/x HTTP/1.1") for r in server.requests)
    response = _post(pool)
    response.close()  # unread: its connection is dropped
    response = _post(pool)
    assert response.read() == b"hello" and server.connections == 2
    response.close()


def test_a_kept_connection_the_server_closed_is_replaced_without_a_retry(serve):
    def answer_then_close(connection, request):
        connection.sendall(OK + b"hello")
        time.sleep(0.05)
        return "close"  # the server drops the idle keep-alive connection
    server = serve(answer_then_close)
    pool = ConnectionPool(server.url, 5)
    for _ in range(2):
        response = _post(pool)
        assert response.read() == b"hello"
        response.close()
        time.sleep(0.2)  # the server has closed it by now
    assert server.connections == 2 and len(server.requests) == 2


def test_a_cancel_while_waiting_for_the_headers_shuts_the_connection_at_once(serve):
    server = serve(lambda connection, request: time.sleep(DELAY * 2))
    settings = UpstreamSettings(base_url=server.url, upstream_model="m", context_length=1, retries=0)
    cancel = Cancel()
    threading.Timer(0.1, cancel.set).start()
    started = time.monotonic()
    with pytest.raises(BackendError) as raised:
        with open_stream(Upstream(ConnectionPool(server.url, 5), settings, "m"), "/v1/x", {}, cancel):
            pass
    assert raised.value.status == 499 and time.monotonic() - started < DELAY


def test_a_stalled_stream_ends_with_the_idle_timeout(serve):
    def one_line_then_silence(connection, request):
        connection.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\ndata:1\r\n1\r\n\n\r\n")
        time.sleep(DELAY * 3)
    server = serve(one_line_then_silence)
    settings = UpstreamSettings(base_url=server.url, upstream_model="m", context_length=1, idle_timeout=0.3)
    lines = []
    with pytest.raises(BackendError, match=r"stopped sending tokens for 0\.3 s"):
        with open_stream(Upstream(ConnectionPool(server.url, 5), settings, "m"), "/v1/x", {}, None) as response:
            for arrived in watched_arrivals(response, settings, None):
                lines += arrived
    assert lines == ["data:1"]


def _comments_then_a_token(seconds: float):
    """An upstream that keeps the stream alive with SSE comments for
    `seconds` before its first token."""
    def answer(connection, request):
        connection.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            connection.sendall(_chunk(b": keep-alive\n\n"))
            time.sleep(0.05)
        connection.sendall(_chunk(b"data: 1\n\n") + b"0\r\n\r\n")
    return answer


def _lines(arrivals) -> list[str]:
    return [line for lines in arrivals for line in lines]


def _chunk(piece: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(piece), piece)


def _watched(server, **timeouts) -> list[str]:
    settings = UpstreamSettings(base_url=server.url, upstream_model="m", context_length=1, **timeouts)
    with open_stream(Upstream(ConnectionPool(server.url, 5), settings, "m"), "/v1/x", {}, None) as response:
        return _lines(watched_arrivals(response, settings, None))


def test_keep_alive_comments_do_not_put_off_the_first_token_deadline(serve):
    server = serve(_comments_then_a_token(DELAY * 3))
    with pytest.raises(BackendError, match=r"sent no token within 0\.3 s") as raised:
        _watched(server, first_token_timeout=0.3, idle_timeout=0.2)
    assert raised.value.status == 504


def test_a_first_token_slower_than_the_idle_timeout_is_in_time(serve):
    server = serve(_comments_then_a_token(DELAY))
    assert "data: 1" in _watched(server, first_token_timeout=DELAY * 5, idle_timeout=0.05)


def test_requests_go_through_the_environments_proxy_with_its_credentials(serve, monkeypatch):
    proxy = serve(lambda connection, request: connection.sendall(OK + b"proxy"))
    monkeypatch.setenv("http_proxy", f"http://us%40er:pw@127.0.0.1:{proxy.port}")
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    response = _post(ConnectionPool("http://upstream.invalid:8000/v1", 5))
    assert response.read() == b"proxy"
    response.close()
    request = proxy.requests[0].decode()
    assert request.startswith("POST http://upstream.invalid:8000/v1/v1/x HTTP/1.1")
    assert "Proxy-Authorization: Basic dXNAZXI6cHc=" in request  # us@er:pw
    direct = serve(lambda connection, request: connection.sendall(OK + b"direc"))
    monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{proxy.port}")
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    response = _post(ConnectionPool(direct.url, 5))
    assert response.read() == b"direc" and len(proxy.requests) == 1
    response.close()


def test_a_reply_that_closes_its_connection_is_read_to_its_end(serve):
    """HTTP/1.0 style (Python's http.server): http.client lets go of the
    socket at once; its timeouts and shutdown must still reach it."""
    def close_delimited(connection, request):
        connection.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: 1\n\ndata: [DONE]\n\n")
        return "close"
    server = serve(close_delimited)
    pool = ConnectionPool(server.url, 5)
    response = _post(pool)
    response.set_read_timeout(2)
    assert _lines(response.arrivals()) == ["data: 1", "", "data: [DONE]", ""]
    response.shut_down()
    response.close()
    response = _post(pool)  # not reused: a new connection
    assert response.read().startswith(b"data: 1") and server.connections == 2
    response.close()


def _chunked(*pieces: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces) + b"0\r\n\r\n"


@pytest.mark.parametrize("pieces", [
    pytest.param([b"data: 1\n\ndata: 2\n\n"], id="two-events-in-one-chunk"),
    pytest.param([b"da", b"ta: 1\n", b"\nda", b"ta: 2\n\n"], id="lines-cut-across-chunks"),
    pytest.param([b"data: 1\r\n\r\ndata: 2\r\n\r\n"], id="crlf"),
    pytest.param([b"data: 1\n\n", b"data: 2"], id="last-line-unterminated"),
], )
def test_a_chunked_bodys_lines_come_whole_however_its_chunks_cut_them(serve, pieces):
    server = serve(lambda connection, request: connection.sendall(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + _chunked(*pieces)))
    pool = ConnectionPool(server.url, 5)
    response = _post(pool)
    lines = _lines(response.arrivals())
    assert [line for line in lines if line] == ["data: 1", "data: 2"] and lines[:2] == ["data: 1", ""]
    response.close()
    response = _post(pool)  # the body was read to its end: the connection is reused
    assert _lines(response.arrivals())[0] == "data: 1" and server.connections == 1
    response.close()


def test_events_that_arrived_together_are_read_together_and_a_later_one_apart(serve):
    """Each SSE event is a chunk of its own (as upstream servers send them);
    a read takes every chunk that has arrived, not one."""
    first_read = threading.Event()

    def bursts(connection, request):
        connection.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" +
                           b"".join(_chunk(b"data: %d\n\n" % n) for n in range(3)))
        first_read.wait(5)
        connection.sendall(_chunk(b"data: 3\n\n") + b"0\r\n\r\n")
    server = serve(bursts)
    pool = ConnectionPool(server.url, 5)
    response = _post(pool)
    arrivals = []
    for lines in response.arrivals():
        arrivals.append(lines)
        first_read.set()
    assert arrivals == [["data: 0", "", "data: 1", "", "data: 2", ""], ["data: 3", ""]]
    response.close()
    response = _post(pool)  # read to its end by our decoding: the connection is reused
    assert _lines(response.arrivals())[0] == "data: 0" and server.connections == 1
    response.close()


@pytest.mark.parametrize("ending, reused", [
    pytest.param(b"0\r\nTrailer-Field: x\r\n\r\n", True, id="trailers"),
    pytest.param(b"0\r\n\r\nunasked", False, id="bytes-after-the-body"),
])
def test_a_chunked_body_read_to_its_end_keeps_its_connection_unless_more_came(serve, ending, reused):
    server = serve(lambda connection, request: connection.sendall(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + _chunk(b"data: 1\n\n") + ending))
    pool = ConnectionPool(server.url, 5)
    for _ in range(2):
        response = _post(pool)
        assert _lines(response.arrivals()) == ["data: 1", ""]
        response.close()
    assert server.connections == (1 if reused else 2)


@pytest.mark.parametrize("body", [
    pytest.param(b"zz\r\ndata: 1\n\n\r\n0\r\n\r\n", id="a-size-that-is-not-hex"),
    pytest.param(_chunk(b"data: 1\n\n")[:-2] + b"XX0\r\n\r\n", id="data-without-its-crlf"),
    pytest.param(_chunk(b"data: 1\n\n"), id="closed-before-the-last-chunk"),
])
def test_a_broken_chunked_body_is_a_broken_stream(serve, body):
    def answer(connection, request):
        connection.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + body)
        return "close"
    server = serve(answer)
    settings = UpstreamSettings(base_url=server.url, upstream_model="m", context_length=1, idle_timeout=5)
    with pytest.raises(BackendError, match="broke off the stream") as raised:
        with open_stream(Upstream(ConnectionPool(server.url, 5), settings, "m"), "/v1/x", {}, None) as response:
            _lines(watched_arrivals(response, settings, None))
    assert raised.value.status == 502


def test_a_line_with_broken_utf8_is_read_with_replacement_characters(serve):
    server = serve(lambda connection, request: connection.sendall(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + _chunked("data: é".encode()[:-1], b"\n")))
    response = _post(ConnectionPool(server.url, 5))
    assert _lines(response.arrivals()) == ["data: \N{REPLACEMENT CHARACTER}"]
    response.close()


def test_the_request_is_written_whole_with_its_headers(serve):
    server = serve(lambda connection, request: connection.sendall(OK + b"hello"))
    pool = ConnectionPool(server.url.replace("http://", "http://user:pw@") + "/v1", 5)
    response = pool.post("/chat", b'{"a": 1}', {"Authorization": "Bearer k", "X-Team": "blue"}, 5,
                         lambda shut_down: None)
    assert response.read() == b"hello"
    response.close()
    head, _, body = server.requests[0].partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /v1/chat HTTP/1.1" and body == b'{"a": 1}'
    assert {"Host: 127.0.0.1:%d" % server.port, "Content-Length: 8", "Authorization: Bearer k",
            "X-Team: blue"} <= set(lines[1:])


@pytest.mark.parametrize("name, value", [("X-Evil", "a\r\nX-Injected: 1"), ("X-Bad\nName", "v"), ("A:B", "v")])
def test_a_header_that_would_break_the_request_is_refused_without_showing_its_value(serve, name, value):
    server = serve(lambda connection, request: connection.sendall(OK + b"hello"))
    with pytest.raises(ValueError) as raised:
        _post_with(ConnectionPool(server.url, 5), {name: value})
    assert "Injected" not in str(raised.value) and server.requests == []


def _post_with(pool, headers):
    return pool.post("/x", b"{}", headers, 5, lambda shut_down: None)
