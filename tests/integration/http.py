"""Raw HTTP helpers: byte-level reads of a streamed body, and a socket that
the test can drop mid-stream like a client that went away."""
from __future__ import annotations

import http.client
import json
import socket
from urllib.parse import urlparse


def post_raw(base: str, path: str, body: dict, headers: dict | None = None) -> tuple[int, dict, bytes]:
    """POST and return status, headers and the de-chunked body bytes."""
    url = urlparse(base)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
    try:
        conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json", **(headers or {})})
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


class DroppableStream:
    """A streaming request on a plain socket; `drop()` closes it abruptly."""

    def __init__(self, base: str, path: str, body: dict, headers: dict | None = None):
        url = urlparse(base)
        self.conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
        self.conn.request("POST", path, body=json.dumps(body),
                          headers={"Content-Type": "application/json", **(headers or {})})
        self.response = None

    def read_line(self) -> bytes:
        if self.response is None:
            self.response = self.conn.getresponse()
        return self.response.readline()

    def drop(self) -> None:
        sock = self.conn.sock
        if sock is not None:
            sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        self.conn.close()
