"""The official anthropic SDK against /v1/messages, on the session's stack
(keys off) and on a web process of its own with keys on and claude-* names
mapped by aliases, beside the same worker; and the exact bytes of a stream."""
from __future__ import annotations

import json
from pathlib import Path

import anthropic
import httpx
import pytest

from dialects.parts import joined
from tests.integration.conftest import KEY
from tests.integration.http import post_raw

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "claude-code-messages-request.json"
WRITE_TOOL = {"name": "Write", "description": "Write a file",
              "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"},
                                                                "content": {"type": "string"}},
                               "required": ["file_path", "content"]}}
READ_TOOL = {"name": "Read", "description": "Read a file",
             "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}}}
CALL_WRITE = ('<invoke name="Write"><parameter name="file_path">/tmp/a.txt</parameter>'
              '<parameter name="content">hello</parameter></invoke>')
CALL_READ = '<invoke name="Read"><parameter name="file_path">/tmp/b.txt</parameter></invoke>'


def _user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


@pytest.fixture
def client(base_url):
    return anthropic.Anthropic(base_url=base_url, api_key="unused", max_retries=0)


def test_create_answers_with_a_message(client):
    message = client.messages.create(model="echo", max_tokens=100, messages=_user("hello there"))
    assert message.id.startswith("msg_") and message.type == "message" and message.role == "assistant"
    assert message.model == "echo"
    assert [(b.type, b.text) for b in message.content] == [("text", "hello there")]
    assert (message.stop_reason, message.stop_sequence) == ("end_turn", None)
    assert (message.usage.input_tokens, message.usage.output_tokens) == (2, 2)


def test_stream_events_and_final_message(client):
    with client.messages.stream(model="echo", max_tokens=100, messages=_user("one two three")) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_message()
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert final.content[0].text == "one two three" and final.stop_reason == "end_turn"
    assert (final.usage.input_tokens, final.usage.output_tokens) == (3, 3)  # message_delta's cumulative usage


def test_a_tool_round_trip(client):
    asked = _user(f"Write it: {CALL_WRITE}")
    first = client.messages.create(model="echo", max_tokens=200, tools=[WRITE_TOOL], messages=asked)
    assert first.stop_reason == "tool_use"
    text, call = first.content
    assert text.type == "text" and call.type == "tool_use" and call.id.startswith("toolu_")
    assert (call.name, call.input) == ("Write", {"file_path": "/tmp/a.txt", "content": "hello"})
    result = [{"type": "tool_result", "tool_use_id": call.id, "content": "File created successfully"}]
    second = client.messages.create(model="echo", max_tokens=200, tools=[WRITE_TOOL], messages=asked + [
        {"role": "assistant", "content": [block.model_dump() for block in first.content]},
        {"role": "user", "content": result}])
    assert second.stop_reason == "end_turn" and second.content[0].text == "File created successfully"


def test_streamed_tool_use_joins_into_the_final_message(client):
    with client.messages.stream(model="echo", max_tokens=200, tools=[WRITE_TOOL, READ_TOOL],
                                messages=_user(CALL_WRITE + CALL_READ)) as stream:
        final = stream.get_final_message()
    calls = [block for block in final.content if block.type == "tool_use"]
    assert [(c.name, c.input) for c in calls] == [("Write", {"file_path": "/tmp/a.txt", "content": "hello"}),
                                                   ("Read", {"file_path": "/tmp/b.txt"})]
    assert final.stop_reason == "tool_use"


def test_parallel_tool_use_can_be_turned_off(client):
    message = client.messages.create(model="echo", max_tokens=200, tools=[WRITE_TOOL, READ_TOOL],
                                     tool_choice={"type": "auto", "disable_parallel_tool_use": True},
                                     messages=_user(CALL_WRITE + CALL_READ))
    assert [block.name for block in message.content if block.type == "tool_use"] == ["Write"]


def test_stop_sequences_and_max_tokens(client):
    stopped = client.messages.create(model="echo", max_tokens=100, stop_sequences=["STOP"],
                                     messages=_user("one two STOP three"))
    assert (stopped.content[0].text, stopped.stop_reason, stopped.stop_sequence) == ("one two ", "stop_sequence", "STOP")
    cut = client.messages.create(model="echo", max_tokens=2, messages=_user("one two three"))
    assert (cut.content[0].text, cut.stop_reason, cut.usage.output_tokens) == ("one two", "max_tokens", 2)


def test_errors_are_typed_sdk_exceptions(client):
    with pytest.raises(anthropic.NotFoundError) as missing:
        client.messages.create(model="claude-sonnet-9-9", max_tokens=10, messages=_user("x"))
    assert missing.value.body["error"]["type"] == "not_found_error"
    assert "claude-sonnet-9-9" in missing.value.message and "echo" in missing.value.message  # names the served models
    assert missing.value.body["request_id"] == missing.value.response.headers["X-Request-Id"]
    with pytest.raises(anthropic.BadRequestError) as bad:
        client.messages.create(model="echo", max_tokens=10, messages=_user("x"), extra_body={"temperature": 1.5})
    assert bad.value.body["error"]["type"] == "invalid_request_error" and "temperature" in bad.value.message


def test_missing_required_fields_are_400s_in_anthropics_words(base_url):
    for body, field in (({"model": "echo", "messages": _user("x")}, "max_tokens"),
                        ({"max_tokens": 5, "messages": _user("x")}, "model")):
        status, _, raw = post_raw(base_url, "/v1/messages", body)
        error = json.loads(raw)
        assert status == 400 and error["type"] == "error"
        assert error["error"] == {"type": "invalid_request_error", "message": f"{field}: Field required"}


def test_claude_codes_own_request_streams_the_answer_exactly(base_url):
    """Its body as sent (24 tools, adaptive thinking, a trailing system
    message, ?beta=true): every frame an `event:` and a `data:` of that type,
    LF only, the blocks in Anthropic's order."""
    request = json.loads(FIXTURE.read_text())
    status, headers, raw = post_raw(base_url, request["path"], request["body"],
                                    {k: v for k, v in request["headers"].items() if k.lower().startswith("anthropic")})
    assert status == 200 and headers["Content-Type"].startswith("text/event-stream")
    assert b"\r" not in raw and raw.endswith(b"\n\n")
    frames = [frame.split(b"\n") for frame in raw.split(b"\n\n")[:-1]]
    assert all(len(f) == 2 and f[0].startswith(b"event: ") and f[1].startswith(b"data: {") for f in frames)
    events = [(f[0].removeprefix(b"event: ").decode(), json.loads(f[1].removeprefix(b"data: "))) for f in frames]
    assert all(name == body["type"] for name, body in events)
    names = [name for name, _ in events]
    deltas = names.count("content_block_delta")
    assert names == ["message_start", "content_block_start", *["content_block_delta"] * deltas,
                     "content_block_stop", "message_delta", "message_stop"]
    # echo answers the user's turn (its <system-reminder> block and the prompt: one message), not the system message
    turn = next(m for m in request["body"]["messages"] if m["role"] == "user")
    text = "".join(body["delta"]["text"] for name, body in events if name == "content_block_delta")
    assert text == joined([block["text"] for block in turn["content"]])[0] and text.endswith("\nsay hi")
    assert events[-2][1]["delta"] == {"stop_reason": "end_turn", "stop_sequence": None}
    opened_with, ended_with = events[0][1]["message"]["usage"], events[-2][1]["usage"]
    assert opened_with["input_tokens"] == ended_with["input_tokens"] == 31  # message_start knows it (echo: words)
    assert (opened_with["output_tokens"], ended_with["output_tokens"]) == (0, len(text.split()))


def test_head_probe_and_anthropic_model_list(base_url):
    assert httpx.head(f"{base_url}/").status_code == 200  # Claude Code's first request
    listing = httpx.get(f"{base_url}/v1/models", headers={"anthropic-version": "2023-06-01"}).json()
    assert listing["data"][0] == {"type": "model", "id": "smollm2:135m", "display_name": "smollm2:135m",
                                  "created_at": listing["data"][0]["created_at"]}
    assert listing["first_id"] == "smollm2:135m" and listing["has_more"] is False
    assert httpx.get(f"{base_url}/v1/models").json()["object"] == "list"  # OpenAI's clients: OpenAI's shape


# --- keys on, claude-* names mapped (tests/integration/conftest.py) -------------------
def test_keys_in_every_place_claude_code_and_the_sdk_put_them(keyed_base, clean_redis):
    with pytest.raises(anthropic.AuthenticationError) as refused:
        anthropic.Anthropic(base_url=keyed_base, api_key="wrong", max_retries=0).messages.create(
            model="echo", max_tokens=10, messages=_user("x"))
    assert refused.value.body["error"]["type"] == "authentication_error"
    for client in (anthropic.Anthropic(base_url=keyed_base, api_key=KEY, max_retries=0),  # x-api-key
                   anthropic.Anthropic(base_url=keyed_base, auth_token=KEY, max_retries=0),  # Authorization: Bearer
                   anthropic.Anthropic(base_url=f"{keyed_base}/k/{KEY}", api_key="ignored", max_retries=0)):
        assert client.messages.create(model="echo", max_tokens=10, messages=_user("hi")).content[0].text == "hi"


def test_aliases_serve_claude_names_listed_under_the_real_one(keyed_base, clean_redis):
    client = anthropic.Anthropic(base_url=keyed_base, api_key=KEY, max_retries=0)
    message = client.messages.create(model="claude-haiku-4-5-20251001", max_tokens=10, messages=_user("title"))
    assert (message.model, message.content[0].text) == ("echo", "title")
    listed = [model.id for model in client.models.list()]
    assert "echo" in listed and not any(name.startswith("claude") for name in listed)
    with pytest.raises(anthropic.NotFoundError):
        client.messages.create(model="claude-opus-4-1", max_tokens=10, messages=_user("x"))


# --- count_tokens ---------------------------------------------------------------------
def test_count_tokens_is_what_the_reply_then_reports(client):
    conversation = {"system": "be brief", "messages": _user("count these five words"), "tools": [WRITE_TOOL]}
    counted = client.messages.count_tokens(model="echo", **conversation)
    replied = client.messages.create(model="echo", max_tokens=50, **conversation)
    assert counted.input_tokens == replied.usage.input_tokens == 6  # echo counts words: 2 + 4


@pytest.mark.slow
def test_count_tokens_uses_the_local_models_own_tokenizer(client):
    """smollm2 counts its chat template and the tool instructions the worker
    adds, as its reply's usage does."""
    conversation = {"system": "You are terse.", "messages": _user("Name a colour."), "tools": [WRITE_TOOL]}
    counted = client.messages.count_tokens(model="smollm2:135m", **conversation)
    replied = client.messages.create(model="smollm2:135m", max_tokens=1, **conversation)
    used = replied.usage  # (Anthropic counts the tokens read from the prompt cache apart)
    assert counted.input_tokens == used.input_tokens + used.cache_read_input_tokens > 100  # tool instructions too


@pytest.mark.slow
def test_a_sessions_second_turn_hits_the_prompt_cache_despite_the_billing_line(client):
    """Claude Code's billing line changes on every request (cch=); it is not
    part of the prompt, so the second turn starts from the first's state."""
    def system(cch: str) -> list[dict]:
        return [{"type": "text", "text": f"x-anthropic-billing-header: cc_version=2.1.332; cch={cch};"},
                {"type": "text", "text": "You are a coding assistant. " * 20, "cache_control": {"type": "ephemeral"}}]
    first_turn = _user("Say one word.")
    first = client.messages.create(model="smollm2:135m", max_tokens=4, system=system("1a2b3"), messages=first_turn,
                                   extra_body={"temperature": 0})
    second = client.messages.create(model="smollm2:135m", max_tokens=4, system=system("9f8e7"), extra_body={
        "temperature": 0}, messages=first_turn + [{"role": "assistant", "content": first.content[0].text},
                                                  {"role": "user", "content": "And another."}])
    first_prompt = first.usage.input_tokens + first.usage.cache_read_input_tokens
    assert second.usage.cache_read_input_tokens >= first_prompt - 8  # all but the reply's tail
    assert 0 < second.usage.input_tokens < 40  # what the cache did not hold: the new turn
