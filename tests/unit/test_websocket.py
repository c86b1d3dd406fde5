"""app/websocket.py on a real socket pair (gevent's), against wsproto's own
client side: the handshake, messages whole however large, fragments joined,
pings answered, a message over the limit closed with 1009; and the frame
loop's WebSocket framing (app/streaming.websocket_text)."""
from __future__ import annotations

import gevent
import pytest
from gevent import socket
from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection, CloseConnection, Message, Ping, Pong, Request, TextMessage,
)
from wsproto.extensions import PerMessageDeflate

from app.streaming import websocket_text
from app.websocket import BINARY, WebSocket
from dialects.writer import Comment, Marker, NamedEvent


class Client:
    """wsproto's client side of the pair, and the server's WebSocket."""

    def __init__(self, deflate: bool = True, max_bytes: int = 10_000_000):
        ours, theirs = socket.socketpair()
        self.sock, self.connection = ours, WSConnection(ConnectionType.CLIENT)
        request = self.connection.send(Request(host="test", target="/v1/responses",
                                               extensions=[PerMessageDeflate()] if deflate else []))
        environ = {"gunicorn.socket": theirs, "PATH_INFO": "/v1/responses"}
        for line in request.decode().split("\r\n")[1:]:
            if line:
                name, value = line.split(": ", 1)
                environ["HTTP_" + name.upper().replace("-", "_")] = value
        self.server = WebSocket.accept(environ, [("x-test", "yes")], max_bytes)
        self.accepted = self.next_event()

    def next_event(self):
        while True:
            event = next(self.connection.events(), None)
            if event is not None:
                return event
            self.connection.receive_data(self.sock.recv(65536) or None)

    def send(self, event) -> None:
        self.sock.sendall(self.connection.send(event))


def test_the_handshake_answers_101_with_deflate_and_its_headers():
    client = Client()
    assert isinstance(client.accepted, AcceptConnection)
    assert [e.name for e in client.accepted.extensions] == ["permessage-deflate"]
    assert (b"x-test", b"yes") in client.accepted.extra_headers
    assert not Client(deflate=False).accepted.extensions


def test_a_large_message_arrives_whole_and_fragments_are_joined():
    client = Client(deflate=False)  # 3 MB on the wire: many times a socket's buffer
    big = "x" * 3_000_000 + "end"
    sender = gevent.spawn(client.server.send, big)
    event, text = client.next_event(), ""
    while True:
        text += event.data
        if event.message_finished:
            break
        event = client.next_event()
    assert sender.get() is True and text == big
    client.send(TextMessage(data="part one, ", message_finished=False))
    client.send(TextMessage(data="part two"))
    client.send(Message(data=b"\x00"))
    assert client.server.receive(timeout=5) == "part one, part two"
    assert client.server.receive(timeout=5) is BINARY


def test_pings_are_answered_and_a_close_is_answered_and_ends_receiving():
    client = Client()
    client.send(Ping(payload=b"hi"))
    assert client.next_event() == Pong(payload=b"hi")
    closed = []
    client.server.on_close = lambda: closed.append(True)
    client.send(CloseConnection(code=1000))
    assert isinstance(client.next_event(), CloseConnection)
    assert client.server.receive(timeout=5) is None and closed == [True] and client.server.close_code == 1000
    assert client.server.send("too late") is False


def test_a_message_over_the_limit_closes_the_socket_with_1009():
    client = Client(max_bytes=1000)
    client.send(TextMessage(data="y" * 1001))
    closing = client.next_event()
    assert isinstance(closing, CloseConnection) and closing.code == 1009
    assert client.server.receive(timeout=5) is None


@pytest.mark.parametrize("frame, text", [
    ({"type": "x", "a": "é"}, '{"type":"x","a":"é"}'),
    (NamedEvent("response.created", {"type": "response.created"}), '{"type":"response.created"}'),
    (Comment("keep-alive"), None),
], ids=["object", "named-event", "comment-is-a-ping"])
def test_each_frame_is_one_text_message(frame, text):
    assert websocket_text(frame) == text


def test_a_marker_has_no_websocket_form():
    with pytest.raises(TypeError):
        websocket_text(Marker("[DONE]"))
