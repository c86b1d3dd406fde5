"""Fewer, fuller writes to a streaming client, as nginx's `tcp_nopush`: the
kernel holds what gunicorn writes to a corked socket (Linux TCP_CORK) and
sends it when the cork is pulled.

gunicorn writes a streamed response's headers, each piece and the chunked
terminator with a send of their own. Each is a segment, and on loopback (a
reverse proxy on the same host, the benchmark) the sender pays for delivering
it: about 0.1 ms each on a 2-core VM, more than framing the piece. The client
gains nothing from receiving headers without a body. So
the headers wait for the first piece, and the last piece for the terminator:
a reply that came whole is one send instead of three. Pieces in between go
out as they are written: no stream is slowed.

Where the socket is not a TCP socket gunicorn gave us (Flask's test client,
another server, a non-Linux system) this does nothing.
"""
from __future__ import annotations

import socket

_CORK = getattr(socket, "TCP_CORK", None)


class Cork:
    def __init__(self, sock: socket.socket | None):
        self._sock = sock if _CORK is not None and _is_tcp(sock) else None
        self._held = False

    def hold(self) -> None:
        """What is written from now on waits in the kernel."""
        if self._sock is not None and not self._held:
            self._held = self._set(1)

    def release(self) -> None:
        """Send what waits, and write through from now on."""
        if self._held:
            self._held = False
            self._set(0)

    def _set(self, value: int) -> bool:
        try:
            self._sock.setsockopt(socket.IPPROTO_TCP, _CORK, value)
        except OSError:  # the client is gone: nothing to hold or send
            return False
        return True


def _is_tcp(sock) -> bool:
    try:
        return sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6) and \
            sock.type == socket.SOCK_STREAM
    except (AttributeError, OSError):
        return False
