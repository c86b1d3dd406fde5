"""The httpx/httpcore internals the upstream transport relies on, pinned:
an upgrade that changes them fails here, not in production.

1. httpcore reads `request.extensions["timeout"]` when it starts reading the
   body, so the read timeout can be raised between headers and body
   (transport._body_timeout).
2. `response.extensions["network_stream"].get_extra_info("socket")` is the
   connection's socket, and shutting it down wakes a blocked read
   (transport.shut_down, on abort and by the watchdog).
"""
from __future__ import annotations

import socket
import threading
import time

import httpx
import pytest

from catalog.upstream import UpstreamSettings
from workers.backends.transport import _body_timeout, shut_down

BODY_DELAY = 0.6


@pytest.fixture
def slow_body_server():
    """Sends headers at once and the body BODY_DELAY seconds later."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    stop = threading.Event()

    def answer(connection):
        with connection:
            connection.recv(65536)
            connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\n")
            stop.wait(BODY_DELAY)
            try:
                connection.sendall(b"late\n")
            except OSError:
                pass

    def serve():
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=answer, args=(connection,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/"
    stop.set()
    listener.close()


def _open(client: httpx.Client, url: str) -> tuple[httpx.Request, httpx.Response]:
    request = client.build_request("POST", url, json={})
    return request, client.send(request, stream=True)


def test_the_read_timeout_set_between_headers_and_body_applies_to_the_body(slow_body_server):
    with httpx.Client(timeout=httpx.Timeout(5, read=0.2)) as client:
        request, response = _open(client, slow_body_server)
        with pytest.raises(httpx.ReadTimeout):  # the headers' timeout, unchanged, is too short for the body
            response.read()
        request, response = _open(client, slow_body_server)
        _body_timeout(request, UpstreamSettings(base_url="http://x", upstream_model="m", context_length=1,
                                                first_token_timeout=1, idle_timeout=1))
        assert request.extensions["timeout"]["read"] == 2
        assert response.read() == b"late\n"


def test_the_connections_socket_is_reachable_and_shutting_it_down_wakes_a_read(slow_body_server):
    with httpx.Client(timeout=5) as client:
        _, response = _open(client, slow_body_server)
        sock = response.extensions["network_stream"].get_extra_info("socket")
        assert isinstance(sock, socket.socket)
        threading.Timer(0.1, shut_down, [response]).start()
        started = time.monotonic()
        with pytest.raises(httpx.HTTPError):
            response.read()
        assert time.monotonic() - started < BODY_DELAY  # woken by the shutdown, not by the body
