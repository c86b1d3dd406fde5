"""The official openai SDK against /v1/responses (what Codex, the Agents SDK
and `client.responses.create` speak), and the exact event sequence of a
stream, with Codex's own first request (shared fixture)."""
from __future__ import annotations

import http.client
import json
from pathlib import Path
from urllib.parse import urlparse

import openai
import pytest
import zstandard

from tests.integration.conftest import KEY, OTHER_KEY
from tests.integration.http import post_raw

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "codex-responses-request.json"
SHELL = {"type": "function", "name": "exec_command", "description": "Run a command",
         "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}
READ = {"type": "function", "name": "read_file", "parameters": {"type": "object", "properties": {
    "path": {"type": "string"}}}}
CALL_SHELL = '<invoke name="exec_command"><parameter name="cmd">ls -la</parameter></invoke>'
CALL_READ = '<invoke name="read_file"><parameter name="path">a.txt</parameter></invoke>'


@pytest.fixture
def client(base_url):
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0)


def test_create_answers_with_a_response(client):
    response = client.responses.create(model="echo", input="hello there", instructions="Be brief.")
    assert response.id.startswith("resp_") and response.object == "response" and response.status == "completed"
    assert response.output_text == "hello there"
    assert [item.type for item in response.output] == ["message"]
    usage = response.usage
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (4, 2, 6)


def test_stream_events_and_final_response(client):
    with client.responses.stream(model="echo", input="one two three") as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.completed"
    assert kinds.count("response.output_text.delta") >= 1 and final.output_text == "one two three"


def test_a_function_call_round_trip(client):
    first = client.responses.create(model="echo", input=f"List the files. {CALL_SHELL}", tools=[SHELL])
    call = next(item for item in first.output if item.type == "function_call")
    assert (call.name, json.loads(call.arguments)) == ("exec_command", {"cmd": "ls -la"})
    assert call.call_id.startswith("call_") and first.status == "completed"
    second = client.responses.create(model="echo", tools=[SHELL], input=[
        {"role": "user", "content": f"List the files. {CALL_SHELL}"},
        {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments},
        {"type": "function_call_output", "call_id": call.call_id, "output": "a.txt\nb.txt"}])
    assert second.output_text == "a.txt\nb.txt"


def test_parallel_calls_and_one_at_a_time(client):
    both = client.responses.create(model="echo", input=CALL_SHELL + CALL_READ, tools=[SHELL, READ])
    assert [item.name for item in both.output if item.type == "function_call"] == ["exec_command", "read_file"]
    one = client.responses.create(model="echo", input=CALL_SHELL + CALL_READ, tools=[SHELL, READ],
                                  parallel_tool_calls=False)
    assert [item.name for item in one.output if item.type == "function_call"] == ["exec_command"]


def test_a_custom_tool_is_called_with_its_text_input(client):
    patch = {"type": "custom", "name": "apply_patch", "description": "Apply a patch"}
    call = ('<invoke name="apply_patch"><parameter name="input">*** Begin Patch\n*** End Patch</parameter>'
            '</invoke>')
    response = client.responses.create(model="echo", input=call, tools=[patch])
    item = next(item for item in response.output if item.type == "custom_tool_call")
    assert (item.name, item.input) == ("apply_patch", "*** Begin Patch\n*** End Patch")


def test_max_output_tokens_makes_it_incomplete(client):
    response = client.responses.create(model="echo", input="one two three four", max_output_tokens=2)
    assert response.status == "incomplete" and response.incomplete_details.reason == "max_output_tokens"
    assert response.output_text == "one two"


def test_errors_are_typed_sdk_exceptions(client):
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model="nope", input="x")
    with pytest.raises(openai.NotFoundError) as unknown:
        client.responses.create(model="echo", input="x", previous_response_id="resp_123")
    assert unknown.value.body["message"] == "Response with id 'resp_123' not found."


def test_codexs_own_request_streams_the_exact_sequence(base_url):
    """Every frame an `event:` and a `data:` of that type with a rising
    sequence_number, LF only, one terminal event, no [DONE]."""
    request = json.loads(FIXTURE.read_text())
    status, headers, raw = post_raw(base_url, request["path"], request["body"])
    assert status == 200 and headers["Content-Type"].startswith("text/event-stream")
    assert b"\r" not in raw and b"[DONE]" not in raw
    frames = [frame.split(b"\n") for frame in raw.split(b"\n\n")[:-1]]
    assert all(len(f) == 2 and f[0].startswith(b"event: ") and f[1].startswith(b"data: {") for f in frames)
    events = [json.loads(f[1].removeprefix(b"data: ")) for f in frames]
    assert [e["type"] for e in events] == [f[0].removeprefix(b"event: ").decode() for f in frames]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert [e["type"] for e in events] == [
        "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
        "response.output_text.delta", "response.output_text.done", "response.content_part.done",
        "response.output_item.done", "response.completed"]
    assert events[4]["delta"] == "say hi" and events[-1]["response"]["output"][0]["content"][0]["text"] == "say hi"


def test_a_zstd_compressed_body_as_codex_sends_it(base_url):
    url = urlparse(base_url)
    body = zstandard.ZstdCompressor().compress(json.dumps({"model": "echo", "input": "packed hi"}).encode())
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    try:
        connection.request("POST", "/v1/responses", body=body, headers={
            "Content-Type": "application/json", "Content-Encoding": "zstd"})
        reply = connection.getresponse()
        assert reply.status == 200
        assert json.loads(reply.read())["output"][0]["content"][0]["text"] == "packed hi"
    finally:
        connection.close()



# --- stored responses -----------------------------------------------------------------
def test_a_stored_response_is_read_continued_and_deleted(client):
    first = client.responses.create(model="echo", input="first turn")
    assert first.store is True and client.responses.retrieve(first.id).output_text == "first turn"
    second = client.responses.create(model="echo", input="second turn", previous_response_id=first.id)
    assert second.output_text == "second turn" and second.previous_response_id == first.id
    assert second.usage.input_tokens == 6  # the stored turns are sent again: first (2 + 2), then this one (2)
    third = client.responses.create(model="echo", input="third", previous_response_id=second.id, store=False)
    assert third.usage.input_tokens == 9
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(third.id)  # store: false keeps nothing
    client.responses.delete(first.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(first.id)
    with pytest.raises(openai.NotFoundError):  # its continuation's history is gone with it
        client.responses.create(model="echo", input="more", previous_response_id=second.id)


def test_stored_responses_are_private_to_their_key(keyed_base, clean_redis):
    alice = openai.OpenAI(base_url=f"{keyed_base}/v1", api_key=KEY, max_retries=0)
    bob = openai.OpenAI(base_url=f"{keyed_base}/v1", api_key=OTHER_KEY, max_retries=0)
    mine = alice.responses.create(model="echo", input="alice's secret")
    assert alice.responses.retrieve(mine.id).output_text == "alice's secret"
    for attempt in (lambda: bob.responses.retrieve(mine.id), lambda: bob.responses.delete(mine.id),
                    lambda: bob.responses.create(model="echo", input="x", previous_response_id=mine.id)):
        with pytest.raises(openai.NotFoundError) as hidden:
            attempt()
        assert hidden.value.body["message"] == f"Response with id '{mine.id}' not found."
    assert alice.responses.retrieve(mine.id).output_text == "alice's secret"  # bob's delete did nothing
