"""The `anthropic` upstream kind through the whole path: a scripted server
speaking Anthropic's stream byte for byte (text, thinking with signatures,
tool use in pieces, an error mid-stream, a 529), and a chain to a second
Switchboard's /v1/messages, reached from every client dialect (Claude
Code's runs through it: tests/integration/test_claude_code.py)."""
from __future__ import annotations

import anthropic
import httpx
import openai
import pytest


READ = {"type": "function", "function": {"name": "read_file", "parameters": {
    "type": "object", "properties": {"file_path": {"type": "string"}}}}}
WRITE_TOOL = {"name": "Write", "input_schema": {"type": "object", "properties": {
    "file_path": {"type": "string"}, "content": {"type": "string"}}}}


@pytest.fixture
def base(upstreams, clean_redis):
    return upstreams["base"]


@pytest.fixture
def scripted(upstreams):
    return upstreams["scripted"]


@pytest.fixture
def claude_client(base):
    return anthropic.Anthropic(base_url=base, api_key="unused", max_retries=0)


@pytest.fixture
def openai_client(base):
    return openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0)


def _user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def _last(scripted, model: str) -> dict:
    return [r for r in scripted.requests if r["body"].get("model") == model][-1]


def test_an_openai_client_reaches_an_anthropic_upstream(openai_client, scripted):
    reply = openai_client.chat.completions.create(model="claude-text", messages=[
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}], max_tokens=50, temperature=1.5)
    assert reply.choices[0].message.content == "Hello from upstream" and reply.choices[0].finish_reason == "stop"
    usage = reply.usage  # Anthropic counts cache reads apart: ours is the whole prompt
    assert (usage.prompt_tokens, usage.completion_tokens, usage.prompt_tokens_details.cached_tokens) == (12, 9, 7)
    sent = _last(scripted, "anthropic-text")
    assert sent["path"] == "/v1/messages" and sent["headers"]["anthropic-version"] == "2023-06-01"
    assert "anthropic-beta" not in sent["headers"]
    assert sent["body"] == {"model": "anthropic-text", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "hi"}]}], "max_tokens": 50, "stream": True, "system": "Be brief.", "temperature": 1.0}


def test_thinking_keeps_its_signature_and_redacted_blocks_both_ways(claude_client, scripted):
    with claude_client.messages.stream(model="claude-think", max_tokens=4000, messages=_user("1+1?"),
                                       thinking={"type": "enabled", "budget_tokens": 2048},
                                       extra_headers={"anthropic-beta": "interleaved-thinking-2025-05-14"}) as stream:
        final = stream.get_final_message()
    thought, redacted, answer = final.content
    assert (thought.type, thought.thinking, thought.signature) == ("thinking", "Let me see. Two.",
                                                                  "c2lnbmVkLWJ5LXVwc3RyZWFt")
    assert (redacted.type, redacted.data) == ("redacted_thinking", "RW5jcnlwdGVk")
    assert answer.text == "It is 2."
    sent = _last(scripted, "anthropic-think")
    assert sent["body"]["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert sent["headers"]["anthropic-beta"] == "interleaved-thinking-2025-05-14"  # the client's betas, passed on
    claude_client.messages.create(model="claude-think", max_tokens=4000, messages=_user("1+1?") + [
        {"role": "assistant", "content": [block.model_dump() for block in final.content]},
        {"role": "user", "content": "and 2+2?"}], thinking={"type": "enabled", "budget_tokens": 2048})
    assert _last(scripted, "anthropic-think")["body"]["messages"][1]["content"][:2] == [
        {"type": "thinking", "thinking": "Let me see. Two.", "signature": "c2lnbmVkLWJ5LXVwc3RyZWFt"},
        {"type": "redacted_thinking", "data": "RW5jcnlwdGVk"}]


def test_an_openai_client_gets_the_upstreams_thinking_as_reasoning(openai_client):
    reply = openai_client.chat.completions.create(model="claude-think", messages=[{"role": "user", "content": "1+1?"}],
                                                  reasoning_effort="low")
    assert reply.choices[0].message.model_extra["reasoning_content"] == "Let me see. Two."
    assert reply.choices[0].message.content == "It is 2."


def test_native_tool_use_streamed_in_pieces(openai_client, claude_client, scripted):
    reply = openai_client.chat.completions.create(model="claude-tool", messages=[{"role": "user", "content": "read"}],
                                                  tools=[READ], parallel_tool_calls=False)
    call = reply.choices[0].message.tool_calls[0]
    assert (call.id, call.function.name, call.function.arguments) == ("toolu_up1", "read_file", '{"file_path": "/a.txt"}')
    assert reply.choices[0].finish_reason == "tool_calls"
    sent = _last(scripted, "anthropic-tool")["body"]
    assert sent["tools"] == [{"name": "read_file", "description": "", "input_schema": READ["function"]["parameters"]}]
    assert sent["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    message = claude_client.messages.create(model="claude-tool", max_tokens=100, messages=_user("read"), tools=[
        {"name": "read_file", "input_schema": READ["function"]["parameters"]}])
    assert [(b.type, getattr(b, "id", None)) for b in message.content] == [("text", None), ("tool_use", "toolu_up1")]
    assert message.content[1].input == {"file_path": "/a.txt"} and message.stop_reason == "tool_use"


def test_an_error_mid_stream_ends_each_dialects_stream_in_band(base, claude_client):
    with pytest.raises(anthropic.APIStatusError) as failed:
        with claude_client.messages.stream(model="claude-error", max_tokens=100, messages=_user("x")) as stream:
            for _ in stream:
                pass
    assert "Overloaded" in str(failed.value)
    with httpx.stream("POST", f"{base}/v1/chat/completions", json={"model": "claude-error", "stream": True,
                                                                     "messages": _user("x")}) as response:
        body = response.read()
    assert b'"content":"Hello' in body and b"failed mid-stream: overloaded_error: Overloaded" in body
    assert body.endswith(b"data: [DONE]\n\n")


def test_a_529_is_a_busy_upstream_in_each_dialect(claude_client, openai_client):
    with pytest.raises(anthropic.InternalServerError) as busy:
        claude_client.messages.create(model="claude-529", max_tokens=10, messages=_user("x"))
    assert busy.value.status_code == 503 and busy.value.body["error"]["type"] == "overloaded_error"
    assert busy.value.response.headers["Retry-After"] == "7"
    with pytest.raises(openai.InternalServerError) as also_busy:
        openai_client.chat.completions.create(model="claude-529", messages=_user("x"))
    assert also_busy.value.status_code == 503


@pytest.mark.parametrize("model, prompt, context", [("claude-too-long", 210000, 200000), ("up-too-long", 5000, 4096)],
                         ids=["anthropic-words", "openai-words"])
def test_an_upstreams_prompt_too_long_is_worded_for_claude_code(claude_client, openai_client, model, prompt, context):
    """Claude Code compacts its conversation on Anthropic's wording, whichever
    upstream refused the prompt; OpenAI clients get ours."""
    with pytest.raises(anthropic.BadRequestError) as refused:
        claude_client.messages.create(model=model, max_tokens=10, messages=_user("x"))
    assert refused.value.body["error"]["message"] == f"prompt is too long: {prompt} tokens > {context} maximum"
    with pytest.raises(openai.BadRequestError) as also:
        openai_client.chat.completions.create(model=model, messages=_user("x"))
    assert f"the prompt is {prompt} tokens, more than the context of {context}" in also.value.message


def test_count_tokens_asks_the_upstream(claude_client, scripted):
    assert claude_client.messages.count_tokens(model="claude-text", messages=_user("count me")).input_tokens == 42
    assert _last(scripted, "anthropic-text")["path"] == "/v1/messages/count_tokens"


# --- a chain: Switchboard -> Switchboard's /v1/messages -------------------------------
def test_a_chained_switchboard_answers_every_dialect(claude_client, openai_client, base):
    assert claude_client.messages.create(model="claude-sb", max_tokens=20, messages=_user("hello chain")
                                         ).content[0].text == "hello chain"
    assert openai_client.chat.completions.create(model="claude-sb", messages=_user("via openai")
                                                 ).choices[0].message.content == "via openai"
    reply = httpx.post(f"{base}/api/chat", json={"model": "claude-sb", "stream": False, "messages": _user("ollama")})
    assert reply.json()["message"]["content"] == "ollama"
