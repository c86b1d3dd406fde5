"""Noticing that a client went away, even while its stream is silent.

A failed write only surfaces at the second write after the close, which can
be seconds away while a job waits in the queue or a long prompt is read. So a
greenlet peeks at the client socket (gunicorn exposes it as
environ["gunicorn.socket"]): an empty peek means the peer closed.
"""
from __future__ import annotations

import socket
from typing import Callable

import gevent


class DisconnectWatch:
    def __init__(self, environ: dict, on_disconnect: Callable[[], None]):
        self._socket = environ.get("gunicorn.socket")
        self._on_disconnect = on_disconnect
        self._greenlet = None

    def start(self) -> "DisconnectWatch":
        if self._socket is not None:
            self._greenlet = gevent.spawn(self._watch)
        return self

    def stop(self) -> None:
        # Must finish before gunicorn reads the next request on a kept-alive
        # connection: two greenlets may not read one socket.
        if self._greenlet is not None and gevent.getcurrent() is not self._greenlet:
            self._greenlet.kill(block=True)
        self._greenlet = None

    def _watch(self) -> None:
        try:
            data = self._socket.recv(1, socket.MSG_PEEK)
        except OSError:
            data = b""
        if data == b"":
            self._on_disconnect()
        # Otherwise the client sent more bytes (a pipelined request): we can no
        # longer tell a close by peeking, and a failed write will tell instead.
