"""app/cork.py and the streamed response's use of it: the headers wait for
the first piece and the last piece for the chunked terminator; pieces in
between are written through; nothing fails once the client is gone."""
from __future__ import annotations

import socket
import types

from flask import Flask

from app.cork import Cork
from app.routes.common import stream_response


def _cork_of(sock: socket.socket) -> int:
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_CORK)


def test_hold_and_release_set_and_clear_the_sockets_cork():
    listener = socket.create_server(("127.0.0.1", 0))
    with listener, socket.create_connection(listener.getsockname()) as client:
        cork = Cork(client)
        cork.hold()
        assert _cork_of(client) == 1
        cork.release()
        assert _cork_of(client) == 0


def test_no_tcp_socket_no_cork_and_a_closed_one_raises_nothing():
    for sock in (None, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM), object()):
        cork = Cork(sock)
        cork.hold()
        cork.release()
    closed = socket.socket()
    cork = Cork(closed)
    closed.close()
    cork.hold()
    cork.release()


class RecordingSocket:
    """What gunicorn's client socket saw, in order."""
    family, type = socket.AF_INET, socket.SOCK_STREAM

    def __init__(self):
        self.log: list[str] = []

    def setsockopt(self, level, option, value):
        assert (level, option) == (socket.IPPROTO_TCP, socket.TCP_CORK)
        self.log.append("hold" if value else "release")


def test_a_stream_holds_its_headers_for_the_first_piece_and_its_last_piece_for_the_terminator():
    sock = RecordingSocket()
    run = types.SimpleNamespace(finished=False, job=types.SimpleNamespace(id="j"),
                                close=lambda: sock.log.append("run closed"))

    def frames():
        yield b"first"
        yield b"middle"
        run.finished = True  # the final event was read: the next piece is the last
        yield b"last"

    with Flask(__name__).test_request_context(environ_base={"gunicorn.socket": sock}):
        response = stream_response(run, frames(), "text/event-stream")
    for piece in response.response:  # as gunicorn serves it: pieces, terminator, close
        sock.log.append(piece.decode())
    sock.log.append("terminator")
    response.close()
    assert sock.log == ["hold", "first", "release", "middle", "hold", "last", "terminator", "release",
                        "run closed"]
