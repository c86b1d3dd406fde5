"""What Codex keeps for us and sends back, sealed with the office secret:
remote compaction (its trigger item over HTTP and over the socket, and
POST /v1/responses/compact with the official openai SDK), reasoning with
`include: ["reasoning.encrypted_content"]` (an Anthropic upstream's signed
thinking there and back), and blobs that are changed or sent by another
person's key: a 400 with OpenAI's code, never a 500."""
from __future__ import annotations

import json

import openai
import pytest
from websockets.sync.client import connect

from ledger.usage import totals_by_person, usage
from tests.integration.conftest import KEY, OTHER_KEY
from tests.integration.http import post_raw
from tests.integration.test_responses_websocket import last, turn, ws_url

CONVERSATION = [{"role": "user", "content": "fix the failing test"}, {"role": "assistant", "content": "looking"},
                {"type": "function_call", "call_id": "c1", "name": "exec_command", "arguments": '{"cmd": "ls"}'},
                {"type": "function_call_output", "call_id": "c1", "output": "test_a.py"}]
TRIGGER = {"type": "compaction_trigger"}


def client_for(base: str, key: str = "unused") -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0)


def test_a_trigger_over_http_answers_one_sealed_compaction_item(base_url):
    status, _, raw = post_raw(base_url, "/v1/responses", {"model": "echo", "stream": True, "store": False,
                                                          "input": CONVERSATION + [TRIGGER]})
    events = [json.loads(frame.split(b"\ndata: ", 1)[1]) for frame in raw.split(b"\n\n")[:-1]]
    assert status == 200 and [e["type"] for e in events] == [
        "response.created", "response.in_progress", "response.output_item.added", "response.output_item.done",
        "response.completed"]  # no text: the summary is sealed, not shown
    (item,) = events[-1]["response"]["output"]
    assert item["type"] == "compaction" and item["encrypted_content"].startswith("sb1.")
    assert "summarise" not in item["encrypted_content"]
    go_on = client_for(base_url).responses.create(model="echo", input=[item, {"role": "user", "content": "go on"}])
    assert go_on.output_text == "go on" and go_on.usage.input_tokens > 50  # the summary came back to the model


def test_a_trigger_on_the_socket_compacts_what_the_socket_remembers(base_url):
    with connect(ws_url(base_url)) as ws:
        first = last(turn(ws, {"model": "echo", "input": CONVERSATION, "store": False}))["response"]
        compacted = last(turn(ws, {"model": "echo", "input": [TRIGGER], "store": False,
                                   "previous_response_id": first["id"]}))["response"]
        assert [item["type"] for item in compacted["output"]] == ["compaction"]
        assert compacted["usage"]["input_tokens"] > first["usage"]["input_tokens"]  # the conversation, then ours
        then = last(turn(ws, {"model": "echo", "input": compacted["output"] + [{"role": "user", "content": "next"}],
                              "store": False}))
    assert then["type"] == "response.completed" and then["response"]["output"][0]["content"][0]["text"] == "next"


def test_the_sdks_compact_keeps_the_user_messages_and_counts_its_job(base_url, redis_client):
    client = client_for(base_url)
    compacted = client.responses.compact(model="echo", input=CONVERSATION + [{"role": "user", "content": "then?"}])
    assert compacted.object == "response.compaction"
    assert [(item.type, getattr(item, "role", None)) for item in compacted.output] == [
        ("message", "user"), ("message", "user"), ("compaction", None)]
    assert compacted.output[1].content[0].text == "then?" and compacted.usage.input_tokens > 50
    assert totals_by_person(usage(redis_client))  # a job like any other: counted
    resumed = client.responses.create(model="echo", input=[item.model_dump(exclude_none=True, mode="json")
                                                           for item in compacted.output])
    assert resumed.status == "completed"


@pytest.mark.parametrize("change", ["one-character", "not-ours"])
def test_a_changed_blob_is_a_400_with_openais_code(base_url, change):
    client = client_for(base_url)
    (item,) = client.responses.compact(model="echo", input="remember this").output[-1:]
    blob = item.encrypted_content
    blob = blob[:-3] + ("A" if blob[-3] != "A" else "B") + blob[-2:] if change == "one-character" else "gAAAA-openai"
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.create(model="echo", input=[{"type": "compaction", "encrypted_content": blob}])
    assert refused.value.body["code"] == "invalid_encrypted_content"
    assert refused.value.body["param"] == "input.0.encrypted_content"


def test_a_blob_made_for_one_key_does_not_open_for_another(keyed_base, clean_redis):
    alice, bob = client_for(keyed_base, KEY), client_for(keyed_base, OTHER_KEY)
    (item,) = alice.responses.compact(model="echo", input="alice's plans").output[-1:]
    sent = [{"type": "compaction", "encrypted_content": item.encrypted_content}, {"role": "user", "content": "x"}]
    assert alice.responses.create(model="echo", input=sent).status == "completed"
    with pytest.raises(openai.BadRequestError) as refused:
        bob.responses.create(model="echo", input=sent)
    assert refused.value.body["code"] == "invalid_encrypted_content"


def test_an_anthropic_upstreams_signed_thinking_goes_there_and_back_sealed(upstreams, clean_redis):
    """claude-think: a scripted Anthropic upstream that thinks, with a
    signature. Asked sealed, the reasoning comes as a blob; sent back, the
    upstream gets its own thinking and signature again."""
    client, scripted = client_for(upstreams["base"]), upstreams["scripted"]
    first = client.responses.create(model="claude-think", input="1+1?", reasoning={"effort": "medium"},
                                    include=["reasoning.encrypted_content"], store=False)
    reasoning = first.output[0]
    assert reasoning.type == "reasoning" and reasoning.encrypted_content.startswith("sb1.")
    assert "c2lnbmVk" not in reasoning.encrypted_content  # the signature travels sealed too
    client.responses.create(model="claude-think", reasoning={"effort": "medium"}, store=False, input=[
        {"role": "user", "content": "1+1?"}, reasoning.model_dump(exclude_none=True, mode="json"),
        {"role": "assistant", "content": first.output_text}, {"role": "user", "content": "and 2+2?"}])
    sent = [r for r in scripted.requests if r["body"].get("model") == "anthropic-think"][-1]["body"]
    assert sent["messages"][1]["content"][0] == {"type": "thinking", "thinking": "Let me see. Two.",
                                                 "signature": "c2lnbmVkLWJ5LXVwc3RyZWFt"}


@pytest.mark.parametrize("how", ["compact", "trigger"])
def test_a_conversation_too_long_to_summarise_is_refused_never_cut(base_url, how):
    """smollm2:135m reads 8K tokens: a conversation far longer is a 400 with
    OpenAI's context_length_exceeded (on which Codex drops its oldest
    items and tries again), before any worker reads it."""
    long = [{"role": "user", "content": "word " * 120_000}]
    body = {"model": "smollm2:135m", "input": long + ([] if how == "compact" else [TRIGGER])}
    status, _, raw = post_raw(base_url, "/v1/responses/compact" if how == "compact" else "/v1/responses", body)
    error = json.loads(raw)["error"]
    assert status == 400 and error["code"] == "context_length_exceeded", raw[:300]
