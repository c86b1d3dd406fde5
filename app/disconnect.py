"""Noticing that a client went away, even while its stream is silent.

A failed write only surfaces at the second write after the close, which can
be seconds away while a job waits in the queue or a long prompt is read. So
the gevent hub watches the client socket (gunicorn exposes it as
environ["gunicorn.socket"]) for readability: readable with no byte waiting
means the peer closed. A libev watcher, not a greenlet blocked in a peek: a
watcher costs next to nothing to start and stop, a greenlet per request
does not.
"""
from __future__ import annotations

import fcntl
import struct
import termios
from typing import Callable

from gevent import get_hub

_READ = 1  # libev's EV_READ


class DisconnectWatch:
    def __init__(self, environ: dict, on_disconnect: Callable[[], None]):
        self._socket = environ.get("gunicorn.socket")
        self._on_disconnect = on_disconnect
        self._watcher = None

    def start(self) -> "DisconnectWatch":
        if self._socket is not None:
            self._watcher = get_hub().loop.io(self._socket.fileno(), _READ)
            self._watcher.start(self._readable)
        return self

    def stop(self) -> None:
        """Must be called before gunicorn reads the next request on a
        kept-alive connection, and before the socket closes (libev must not
        watch a closed file descriptor, whose number the next one reuses)."""
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher.close()
            self._watcher = None

    def _readable(self) -> None:
        """In the hub (nothing here may block): once readable, the socket
        tells a close (nothing to read) from more bytes (a pipelined request:
        a close can no longer be told this way, and a failed write will tell)."""
        fileno = self._watcher.fd
        self.stop()
        if _bytes_waiting(fileno) == 0:
            self._on_disconnect()


def _bytes_waiting(fileno: int) -> int:
    """What a read would return now, without reading it; 0 after the peer's
    close (or reset)."""
    try:
        return struct.unpack("i", fcntl.ioctl(fileno, termios.FIONREAD, b"\0\0\0\0"))[0]
    except OSError:
        return 0
