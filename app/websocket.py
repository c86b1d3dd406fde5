"""A WebSocket on a request's own socket: the upgrade, text messages each
way, pings, and the close handshake, over wsproto (python-hyper's sans-IO
implementation of RFC 6455 and permessage-deflate, RFC 7692).

gunicorn's gevent worker hands the connection over as
environ["gunicorn.socket"]; the view that accepts it keeps the request's
greenlet for the socket's life, and a reader greenlet feeds what arrives to
wsproto. Everything sent goes through one lock and `sendall`: a frame is
never cut (a non-blocking socket's `send` may write part of it) nor
interleaved with a pong the reader answers at the same moment. (That is why
not flask-sock: simple-websocket writes with `send` from two greenlets, and
cannot add headers to the 101 response.)

`accept` answers the upgrade, `receive` gives the next text message (None
once the socket is closed), `send` writes one, `close` ends it with a code.
A client's close, a reset, or a message over `max_message_bytes` ends the
socket; whoever waits in `receive` then gets None, and `on_close` is called
once, in the reader.
"""
from __future__ import annotations

import logging
from typing import Callable

import gevent
from gevent.lock import Semaphore
from gevent.queue import Queue
from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection, BytesMessage, CloseConnection, Ping, Request, TextMessage,
)
from wsproto.extensions import PerMessageDeflate
from wsproto.frame_protocol import CloseReason
from wsproto.utilities import LocalProtocolError, RemoteProtocolError

log = logging.getLogger(__name__)

READ_BYTES = 65536
BINARY = object()  # what `receive` gives for a binary message (the caller names the problem)


def is_upgrade(environ: dict) -> bool:
    return environ.get("HTTP_UPGRADE", "").lower() == "websocket" and \
        "upgrade" in environ.get("HTTP_CONNECTION", "").lower()


def _request_bytes(environ: dict) -> bytes:
    """The upgrade request as it came (gunicorn parsed it already): wsproto
    checks the handshake's headers and negotiates the extensions from it."""
    lines = [f"GET {environ.get('RAW_URI') or environ.get('PATH_INFO', '/')} HTTP/1.1"]
    for name, value in environ.items():
        if name.startswith("HTTP_"):
            lines.append(f"{name[5:].replace('_', '-').lower()}: {value}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


class WebSocket:
    def __init__(self, sock, connection: WSConnection, max_message_bytes: int):
        self._sock, self._connection, self._max = sock, connection, max_message_bytes
        self._lock = Semaphore()
        self._inbox: Queue = Queue()
        self._parts: list[str] = []
        self._size = 0
        self.closed = False
        self.close_code: int | None = None
        self.on_close: Callable[[], None] = lambda: None
        # Given each message as it arrives (in the reader): True if it took it, else it waits for `receive`.
        self.intercept: Callable[[object], bool] = lambda message: False
        self._reader = None

    @classmethod
    def accept(cls, environ: dict, headers: list[tuple[str, str]], max_message_bytes: int) -> "WebSocket":
        """Answer the upgrade with 101 (and `headers`), and start reading."""
        sock = environ["gunicorn.socket"]
        connection = WSConnection(ConnectionType.SERVER)
        connection.receive_data(_request_bytes(environ))
        next(event for event in connection.events() if isinstance(event, Request))
        websocket = cls(sock, connection, max_message_bytes)
        # wsproto takes an extension only if the client offered it: permessage-deflate for Codex, none for others.
        websocket._write(AcceptConnection(extensions=[PerMessageDeflate()],
                                          extra_headers=[(k.encode(), v.encode()) for k, v in headers]))
        websocket._reader = gevent.spawn(websocket._read)
        return websocket

    # --- sending ---------------------------------------------------------------------------
    def _write(self, event) -> None:
        with self._lock:
            data = self._connection.send(event)
            self._sock.sendall(data)

    def send(self, text: str) -> bool:
        """One text message; False if the socket is closed (nothing sent)."""
        if self.closed:
            return False
        try:
            self._write(TextMessage(data=text))
            return True
        except (OSError, LocalProtocolError):
            self._ended(CloseReason.ABNORMAL_CLOSURE)
            return False

    def ping(self) -> None:
        if not self.closed:
            try:
                self._write(Ping())
            except (OSError, LocalProtocolError):
                self._ended(CloseReason.ABNORMAL_CLOSURE)

    def close(self, code: int = CloseReason.NORMAL_CLOSURE, reason: str = "") -> None:
        """Our close frame (once), then the socket is done for us."""
        if self.closed:
            return
        try:
            self._write(CloseConnection(code=code, reason=reason or None))
        except (OSError, LocalProtocolError):
            pass
        self._ended(code)

    # --- receiving -------------------------------------------------------------------------
    def receive(self, timeout: float | None = None):
        """The next text message (BINARY for a binary one); None when closed,
        or when `timeout` passed with nothing (then `closed` is still False)."""
        if self.closed and self._inbox.empty():
            return None
        try:
            return self._inbox.get(timeout=timeout)
        except gevent.queue.Empty:
            return None

    def _read(self) -> None:
        try:
            while not self.closed:
                data = self._sock.recv(READ_BYTES)
                if not data:
                    break
                self._connection.receive_data(data)
                self._handle_events()
        except (OSError, RemoteProtocolError, LocalProtocolError) as error:
            log.debug("websocket read ended: %s", error)
        self._ended(CloseReason.ABNORMAL_CLOSURE)

    def _handle_events(self) -> None:
        for event in self._connection.events():
            if isinstance(event, TextMessage):
                self._gather(event.data, event.message_finished)
            elif isinstance(event, BytesMessage):
                if event.message_finished:
                    self._arrived(BINARY)
            elif isinstance(event, Ping):
                self._write(event.response())
            elif isinstance(event, CloseConnection):
                if not self.closed:
                    try:
                        self._write(event.response())
                    except (OSError, LocalProtocolError):
                        pass
                self._ended(event.code)

    def _gather(self, text: str, finished: bool) -> None:
        self._parts.append(text)
        self._size += len(text.encode())
        if self._size > self._max:
            self.close(CloseReason.MESSAGE_TOO_BIG, f"a message may be at most {self._max} bytes")
            return
        if finished:
            message, self._parts, self._size = "".join(self._parts), [], 0
            self._arrived(message)

    def _arrived(self, message) -> None:
        if not self.intercept(message):
            self._inbox.put(message)

    def _ended(self, code: int) -> None:
        if self.closed:
            return
        self.closed, self.close_code = True, int(code)
        self._inbox.put(None)  # wakes a receive
        self.on_close()

    def wait_closed(self, timeout: float) -> None:
        """Let the reader see the client's answering close (or give up)."""
        if self._reader is not None:
            self._reader.join(timeout)
            self._reader.kill(block=False)
