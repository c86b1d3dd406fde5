"""The Responses API over a WebSocket (GET /v1/responses upgraded), driven
with a raw client (the `websockets` library: the bytes of every message) and
with the official openai SDK's own socket (client.responses.connect): the
same events as the SSE stream of the same request, continuation on the
socket with `store: false`, errors as events on a socket that stays usable,
one turn at a time, abort on close, keys before the upgrade, the connection
limit, and the operator's off switch (426)."""
from __future__ import annotations

import json
import re
import signal
import socket
import time
from pathlib import Path

import openai
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, CloseConnection, Ping, Request, TextMessage

from ledger.usage import usage
from scripts.processes import WORKER_SLOTS, stack_env, start_web
from tests.integration.conftest import KEY, OTHER_KEY
from tests.integration.http import DroppableStream, post_raw
from tests.integration.test_abort import LONG_TEXT, wait_for_state

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "codex-responses-websocket.json"
TERMINAL = ("response.completed", "response.incomplete", "response.failed", "error")


def ws_url(base: str, path: str = "/v1/responses") -> str:
    return base.replace("http://", "ws://", 1) + path


def turn(ws, body: dict) -> list[str]:
    """One response.create and the messages answering it, as sent."""
    ws.send(json.dumps({"type": "response.create"} | body))
    return until_terminal(ws)


def until_terminal(ws) -> list[str]:
    messages = []
    while True:
        messages.append(ws.recv(timeout=60))
        if json.loads(messages[-1])["type"] in TERMINAL:
            return messages


def last(messages: list[str]) -> dict:
    return json.loads(messages[-1])


def same_ids(text: str, response_id: str) -> str:
    """A stream's text with its own response id (and the item ids made from
    it) and creation time replaced: two runs of one request then compare."""
    text = text.replace(response_id.removeprefix("resp_"), "ID")
    return re.sub(r'"created_at":\d+', '"created_at":0', text)


def test_each_event_is_one_text_message_with_the_bytes_of_its_sse_data(base_url):
    """Codex's own first frame (shared fixture) over the socket, and its body
    POSTed as SSE: the same events in the same order, byte for byte. Its
    last message is one word, so echo answers with one text event each time
    (several arrive merged or apart as the machine's load has it)."""
    body = {k: v for k, v in json.loads(FIXTURE.read_text())["first_frame"].items() if k != "type"}
    body["input"][-1]["content"] = [{"type": "input_text", "text": "plain"}]
    with connect(ws_url(base_url)) as ws:
        messages = turn(ws, body)
    status, _, raw = post_raw(base_url, "/v1/responses", body)
    assert status == 200
    sse_data = [frame.split(b"\ndata: ", 1)[1].decode() for frame in raw.split(b"\n\n")[:-1]]
    ws_id, sse_id = last(messages)["response"]["id"], json.loads(sse_data[-1])["response"]["id"]
    assert [same_ids(m, ws_id) for m in messages] == [same_ids(d, sse_id) for d in sse_data]
    assert [json.loads(m)["sequence_number"] for m in messages] == list(range(len(messages)))
    assert last(messages)["type"] == "response.completed"
    assert last(messages)["response"]["output"][0]["content"][0]["text"] == "plain"


def test_the_openai_sdk_continues_on_the_socket_without_storing(base_url):
    """`store: false` and only the new input after previous_response_id, as
    Codex sends: the model sees the whole conversation (the input tokens
    count it), and nothing was stored (another socket cannot continue it)."""
    client = openai.OpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0)
    with client.responses.connect() as connection:
        connection.send({"type": "response.create", "model": "echo", "input": "first turn", "store": False})
        first = next(e for e in connection if e.type in TERMINAL)
        assert first.type == "response.completed" and first.response.usage.input_tokens == 2
        connection.send({"type": "response.create", "model": "echo", "input": "second turn", "store": False,
                         "previous_response_id": first.response.id})
        second = next(e for e in connection if e.type in TERMINAL)
        assert second.response.output_text == "second turn"
        assert second.response.usage.input_tokens == 6  # first (2 + 2), then this one (2)
    with connect(ws_url(base_url)) as ws:
        refused = last(turn(ws, {"model": "echo", "input": "x", "previous_response_id": first.response.id}))
    assert refused["type"] == "error" and refused["status"] == 404
    assert refused["error"]["code"] == "previous_response_not_found"


def test_a_stored_response_continues_from_any_socket_or_over_http(base_url):
    with connect(ws_url(base_url)) as ws:
        first = last(turn(ws, {"model": "echo", "input": "kept", "store": True}))["response"]
    with connect(ws_url(base_url)) as ws:
        second = last(turn(ws, {"model": "echo", "input": "more", "previous_response_id": first["id"]}))
    assert second["response"]["usage"]["input_tokens"] == 3  # "kept" twice (input, output), then "more"
    client = openai.OpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0)
    assert client.responses.retrieve(first["id"]).output_text == "kept"


@pytest.mark.parametrize("message, status, words", [
    ("not json", 400, "not valid JSON"),
    (b"\x00binary", 400, "text frames"),
    ("[1, 2]", 400, "JSON object"),
    ('{"type": "response.cancel"}', 400, "'response.cancel' is not an event"),
    ('{"type": {"a": 1}}', 400, "is not an event"),
    ('{"type": "response.create", "input": "no model"}', 400, "model"),
    ('{"type": "response.create", "model": "nope", "input": "x"}', 404, "nope"),
    ('{"type": "response.create", "model": "echo", "input": [{"type": [1], "role": "user"}]}', 400, "input.0"),
    ('{"type": "response.create", "model": "echo", "input": "x", "background": true}', 400, "background"),
], ids=["not-json", "binary", "array", "unknown-type", "type-object", "no-model", "unknown-model", "bad-item",
        "background"])
def test_a_bad_message_gets_an_error_event_and_the_socket_goes_on(base_url, message, status, words):
    with connect(ws_url(base_url)) as ws:
        ws.send(message)
        error = json.loads(ws.recv(timeout=30))
        assert error["type"] == "error" and error["status"] == status, error
        assert words in error["error"]["message"] and error["error"]["type"]
        assert last(turn(ws, {"model": "echo", "input": "still here"}))["type"] == "response.completed"


def test_one_turn_at_a_time_and_closing_aborts_it(base_url, redis_client, tap):
    with connect(ws_url(base_url)) as ws:
        ws.send(json.dumps({"type": "response.create", "model": "echo:slow", "input": LONG_TEXT}))
        while json.loads(ws.recv(timeout=30))["type"] != "response.output_text.delta":
            pass
        ws.send(json.dumps({"type": "response.create", "model": "echo", "input": "me too"}))
        while (event := json.loads(ws.recv(timeout=30)))["type"] == "response.output_text.delta":
            pass
        assert event["type"] == "error" and event["status"] == 409, event
        assert "already in progress" in event["error"]["message"]
        assert json.loads(ws.recv(timeout=30))["type"] == "response.output_text.delta"  # the first goes on
        closed_at = time.monotonic()
    aborted_at, job_id = tap.wait_for_abort()
    assert aborted_at - closed_at < 1.0
    assert wait_for_state(redis_client, job_id, "aborted", timeout=5)["status"] == "finished"


def test_a_dropped_connection_aborts_its_response(base_url, redis_client, tap):
    ws = connect(ws_url(base_url))
    ws.send(json.dumps({"type": "response.create", "model": "echo:slow", "input": LONG_TEXT}))
    while json.loads(ws.recv(timeout=30))["type"] != "response.output_text.delta":
        pass
    ws.socket.close()  # no close frame: the connection is just gone
    dropped_at = time.monotonic()
    aborted_at, job_id = tap.wait_for_abort()
    assert aborted_at - dropped_at < 1.0
    wait_for_state(redis_client, job_id, "aborted", timeout=5)


def test_keys_are_checked_before_the_upgrade(keyed_base, clean_redis):
    with pytest.raises(InvalidStatus) as refused:
        connect(ws_url(keyed_base))
    assert refused.value.response.status_code == 401
    with pytest.raises(InvalidStatus):
        connect(ws_url(keyed_base), additional_headers={"Authorization": "Bearer wrong"})
    with connect(ws_url(keyed_base), additional_headers={"Authorization": f"Bearer {KEY}"}) as ws:
        mine = last(turn(ws, {"model": "echo", "input": "alice's", "store": True}))["response"]
    with connect(ws_url(keyed_base, f"/k/{OTHER_KEY}/v1/responses")) as ws:  # bob, his key in the path
        hidden = last(turn(ws, {"model": "echo", "input": "x", "previous_response_id": mine["id"]}))
    assert hidden["type"] == "error" and hidden["status"] == 404


def test_past_its_life_a_socket_refuses_the_next_turn_as_openai_does(socket_webs, clean_redis):
    _, short = socket_webs["short"]
    with connect(ws_url(short)) as ws:
        assert last(turn(ws, {"model": "echo", "input": "in time"}))["type"] == "response.completed"
        time.sleep(2.5)  # the socket's whole life (2 s) passes
        refused = last(turn(ws, {"model": "echo", "input": "too late"}))
        assert refused["type"] == "error" and refused["error"]["code"] == "websocket_connection_limit_reached"
        assert "Create a new websocket connection to continue." in refused["error"]["message"]
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=10)
        assert ws.close_code == 1000


def test_switched_off_the_upgrade_is_answered_426(socket_webs, clean_redis):
    _, off = socket_webs["off"]
    with pytest.raises(InvalidStatus) as refused:
        connect(ws_url(off))
    assert refused.value.response.status_code == 426
    assert b"switched off" in refused.value.response.body
    client = openai.OpenAI(base_url=f"{off}/v1", api_key="unused", max_retries=0)
    assert client.responses.create(model="echo", input="over http").output_text == "over http"


def test_generate_false_answers_an_empty_response_and_runs_no_job(base_url, redis_client):
    """Codex warms a new socket so: its prompt, no output; the next turn
    continues it (the model then sees that prompt once)."""
    with connect(ws_url(base_url)) as ws:
        warm = turn(ws, {"model": "echo", "input": "the prompt", "store": False, "generate": False})
        assert [json.loads(m)["type"] for m in warm] == ["response.created", "response.in_progress",
                                                         "response.completed"]
        assert last(warm)["response"]["output"] == [] and last(warm)["response"]["usage"]["input_tokens"] == 0
        assert usage(redis_client) == {}  # (clean_redis: nothing was counted before it either)
        then = last(turn(ws, {"model": "echo", "input": "go", "store": False,
                              "previous_response_id": last(warm)["response"]["id"]}))
    assert then["response"]["usage"]["input_tokens"] == 3  # "the prompt" (2), then "go" (1)


def test_on_shutdown_an_idle_socket_closes_at_once_and_a_busy_one_after_its_turn(stack, redis_url, clean_redis):
    """SIGTERM to the web process (its grace period 120 s): the idle socket
    is closed with 1012 (service restart) at once, the busy one finishes its
    response first, and the process exits without waiting out the grace."""
    web, base = start_web(stack_env(redis_url))
    try:
        idle, busy = connect(ws_url(base)), connect(ws_url(base))
        busy.send(json.dumps({"type": "response.create", "model": "echo:slow", "input": "one two three four five"}))
        while json.loads(busy.recv(timeout=30))["type"] != "response.output_text.delta":
            pass
        web.popen.send_signal(signal.SIGTERM)
        with pytest.raises(ConnectionClosed):
            idle.recv(timeout=10)
        assert idle.close_code == 1012
        assert json.loads(until_terminal(busy)[-1])["type"] == "response.completed"
        with pytest.raises(ConnectionClosed):
            busy.recv(timeout=10)
        assert busy.close_code == 1012
        web.popen.wait(15)
    finally:
        web.stop()


def test_while_its_job_waits_in_the_queue_the_socket_gets_pings(socket_webs, base_url):
    """The worker's slots all busy, a turn waits: after response.created
    and response.in_progress, a ping every keep-alive (0.3 s on "short"),
    then its events once a slot frees. Read with wsproto, frame by frame."""
    _, short = socket_webs["short"]
    blockers = [DroppableStream(base_url, "/api/chat", {"model": "echo:slow", "messages": [
        {"role": "user", "content": LONG_TEXT}]}) for _ in range(WORKER_SLOTS)]
    for blocker in blockers:
        assert blocker.read_line()
    sock = socket.create_connection(("127.0.0.1", int(short.rsplit(":", 1)[1])), timeout=30)
    client = WSConnection(ConnectionType.CLIENT)
    sock.sendall(client.send(Request(host="127.0.0.1", target="/v1/responses")))
    arrived = []

    def next_event():
        while (event := next(client.events(), None)) is None:
            client.receive_data(sock.recv(65536) or None)
        arrived.append(event)
        return event
    assert isinstance(next_event(), AcceptConnection)
    sock.sendall(client.send(TextMessage(data=json.dumps({"type": "response.create", "model": "echo",
                                                          "input": "waiting"}))))
    while sum(isinstance(e, Ping) for e in arrived) < 3:
        assert not isinstance(next_event(), CloseConnection)
    texts = [json.loads(e.data)["type"] for e in arrived if isinstance(e, TextMessage)]
    assert texts == ["response.created", "response.in_progress"]  # nothing else while it waits
    for blocker in blockers:
        blocker.drop()
    while not (isinstance(event := next_event(), TextMessage) and '"response.completed"' in event.data):
        if isinstance(event, Ping):
            sock.sendall(client.send(event.response()))
    sock.close()
