"""What Copilot CLI (a Codex-family model id: freeform `apply_patch` on Chat
Completions) and Kilo (a user turn of two text parts) send, replayed through
the gateway as captured; the official SDKs on custom tools and on messages
of several parts, on every dialect that has parts."""
from __future__ import annotations

import json

import anthropic
import openai
import pytest

from tests.integration.http import post_raw
from tests.integration.sse_rules import parse_sse

PATCH = "*** Begin Patch\n*** Add File: made-by-agent.txt\n+written by the agent\n*** End Patch\n"
APPLY_PATCH = f'<invoke name="apply_patch"><parameter name="input">{PATCH}</parameter></invoke>'
CUSTOM_TOOL = {"type": "custom", "custom": {"name": "apply_patch", "description": "Edit files.", "format": {
    "type": "grammar", "grammar": {"syntax": "lark", "definition": 'start: "*** Begin Patch" /(.|\\n)+/'}}}}


def _deltas(chunks: list[dict]) -> list[dict]:
    return [c["choices"][0]["delta"] for c in chunks if c["choices"]]


def test_copilot_clis_plain_turn_is_answered_with_no_tool_calls_key(base_url, copilot_cli_fixture):
    fixture = copilot_cli_fixture
    status, _, body = post_raw(base_url, fixture["path"], fixture["body"], {"user-agent": "OpenAI/JS 5.20.1"})
    assert status == 200
    chunks = parse_sse(body)
    assert "".join(d.get("content", "") for d in _deltas(chunks)).endswith("plain answer please")
    assert all("tool_calls" not in d for d in _deltas(chunks))  # never null: Copilot CLI crashes on it
    assert [c for c in chunks if c["choices"]][-1]["choices"][0]["finish_reason"] == "stop"


def test_copilot_clis_apply_patch_comes_back_as_a_custom_call(base_url, copilot_cli_fixture):
    body = json.loads(json.dumps(copilot_cli_fixture["body"]))
    body["messages"][-1]["content"] = APPLY_PATCH
    status, _, raw = post_raw(base_url, "/v1/chat/completions", body)
    assert status == 200
    chunks = parse_sse(raw)
    pieces = [d["tool_calls"][0] for d in _deltas(chunks) if "tool_calls" in d]
    assert pieces[0]["type"] == "custom" and pieces[0]["custom"] == {"name": "apply_patch", "input": ""}
    assert pieces[0]["id"].startswith("call_") and pieces[1] == {"index": 0, "custom": {"input": PATCH}}
    assert [c for c in chunks if c["choices"]][-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_kilos_turn_of_two_parts_is_one_message(base_url, kilo_fixture):
    """Its first part holds the call, its second the environment details:
    echo answers the whole turn, so the call is made."""
    status, _, raw = post_raw(base_url, kilo_fixture["path"], kilo_fixture["body"])
    assert status == 200
    pieces = [d["tool_calls"][0] for d in _deltas(parse_sse(raw)) if "tool_calls" in d]
    assert pieces[0]["function"]["name"] == "write"
    assert json.loads(pieces[1]["function"]["arguments"]) == {
        "filePath": "/home/dev/project/made-by-agent.txt", "content": "written by the agent"}


@pytest.fixture
def oai(base_url):
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key="none", max_retries=0)


def test_the_openai_sdk_gets_a_custom_call_whole_and_sends_its_result_back(oai):
    reply = oai.chat.completions.create(model="echo", tools=[CUSTOM_TOOL],
                                        messages=[{"role": "user", "content": APPLY_PATCH}])
    message = reply.choices[0].message
    (call,) = message.tool_calls
    assert (call.type, call.custom.name, call.custom.input) == ("custom", "apply_patch", PATCH)
    assert reply.choices[0].finish_reason == "tool_calls"
    follow = oai.chat.completions.create(model="echo", tools=[CUSTOM_TOOL], messages=[
        {"role": "user", "content": APPLY_PATCH}, message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "Done!"}])
    assert follow.choices[0].message.tool_calls is None and "Done!" in follow.choices[0].message.content
    assert "tool_calls" not in follow.choices[0].message.model_dump(exclude_unset=True)


def test_the_openai_sdk_streams_a_custom_call_in_pieces_joined_by_index(oai):
    """The SDK's chunk types know only function calls: a custom call's
    fields arrive as extras, joined by index as the SDK joins every piece
    (its `.stream()` helper cannot build a custom call from a stream at
    all, whoever streams it; Copilot CLI's openai-node joins them)."""
    calls: dict[int, dict] = {}
    for chunk in oai.chat.completions.create(model="echo", tools=[CUSTOM_TOOL], stream=True,
                                             messages=[{"role": "user", "content": APPLY_PATCH}]):
        for piece in chunk.choices[0].delta.tool_calls or [] if chunk.choices else []:
            call = calls.setdefault(piece.index, {"id": piece.id, "type": piece.type, "name": "", "input": ""})
            custom = piece.model_extra["custom"]
            call["name"] += custom.get("name", "")
            call["input"] += custom["input"]
    assert list(calls.values()) == [{"id": calls[0]["id"], "type": "custom", "name": "apply_patch", "input": PATCH}]


@pytest.mark.parametrize("model", ["up-sb", "up-sb-custom", "up-ollama", "claude-sb"])
def test_a_custom_call_through_each_upstream_kind(upstreams, clean_redis, model):
    """Chained to the session's Switchboard: as a function of one `input`
    (OpenAI-compatible, Ollama, Anthropic), or as a custom tool to an
    upstream that takes them (custom_tools = true); a custom call back
    either way, and its result sent back in history."""
    client = openai.OpenAI(base_url=f"{upstreams['base']}/v1", api_key="none", max_retries=0)
    reply = client.chat.completions.create(model=model, tools=[CUSTOM_TOOL],
                                           messages=[{"role": "user", "content": APPLY_PATCH}])
    (call,) = reply.choices[0].message.tool_calls
    assert (call.type, call.custom.name, call.custom.input) == ("custom", "apply_patch", PATCH)
    follow = client.chat.completions.create(model=model, tools=[CUSTOM_TOOL], messages=[
        {"role": "user", "content": APPLY_PATCH}, reply.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "Done!"}])
    assert "Done!" in follow.choices[0].message.content and follow.choices[0].finish_reason == "stop"


PARTS = ["first part", "second part"]


@pytest.mark.parametrize("dialect", ["chat", "responses", "messages"])
def test_a_message_of_two_parts_is_answered_as_one_turn(base_url, oai, dialect):
    if dialect == "chat":
        text = oai.chat.completions.create(model="echo", messages=[{"role": "user", "content": [
            {"type": "text", "text": part} for part in PARTS]}]).choices[0].message.content
    elif dialect == "responses":
        text = oai.responses.create(model="echo", store=False, input=[{"role": "user", "content": [
            {"type": "input_text", "text": part} for part in PARTS]}]).output_text
    else:
        client = anthropic.Anthropic(base_url=base_url, api_key="none", max_retries=0)
        text = client.messages.create(model="echo", max_tokens=50, messages=[{"role": "user", "content": [
            {"type": "text", "text": part} for part in PARTS]}]).content[0].text
    assert text == "first part\nsecond part"
