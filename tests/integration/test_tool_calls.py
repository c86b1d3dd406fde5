"""Emulated tool calling end to end with the echo model: its reply is the
user's text, so a user message with `<invoke>` blocks is a model reply with
calls. Through the real web, queue, worker and relay."""
from __future__ import annotations

import json

import ollama
import openai
import pytest

from tests.integration.http import post_raw
from tests.integration.sse_rules import assert_well_formed, parse_sse

READ_FILE = {"type": "function", "function": {
    "name": "read_file", "description": "Read a file.",
    "parameters": {"type": "object", "properties": {
        "filePath": {"type": "string"}, "startLine": {"type": "integer"}, "endLine": {"type": "number"},
        "verbose": {"type": "boolean"}}, "required": ["filePath"]}}}
CREATE_FILE = {"type": "function", "function": {
    "name": "create_file", "parameters": {"type": "object", "properties": {
        "filePath": {"type": "string"}, "content": {"type": "string"}}}}}
TOOLS = [READ_FILE, CREATE_FILE]


def invoke(name: str, **arguments) -> str:
    params = "".join(f'<parameter name="{k}">{v}</parameter>' for k, v in arguments.items())
    return f'<invoke name="{name}">{params}</invoke>'


def user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


@pytest.fixture
def client(base_url):
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0)


def sse_chunks(body: bytes) -> list[dict]:
    chunks = parse_sse(body)
    assert_well_formed(chunks, include_usage=chunks[-1]["choices"] == [])
    return chunks


def test_sse_tool_call_pieces_are_exactly_what_copilot_and_the_sdk_need(base_url):
    text = "Let me look." + invoke("read_file", filePath="/a.ts", startLine=10) + invoke("create_file", filePath="/b.ts",
                                                                                      content="x < y && z")
    status, _, body = post_raw(base_url, "/v1/chat/completions", {
        "model": "echo", "stream": True, "stream_options": {"include_usage": True}, "tools": TOOLS,
        "messages": user(text)})
    assert status == 200
    deltas = [c["choices"][0]["delta"] for c in sse_chunks(body) if c["choices"]]
    finishes = [c["choices"][0]["finish_reason"] for c in sse_chunks(body) if c["choices"]]
    assert deltas[0] == {"role": "assistant", "content": ""}
    content = "".join(d.get("content", "") for d in deltas)
    assert content == "Let me look."
    pieces = [d["tool_calls"][0] for d in deltas if "tool_calls" in d]
    assert all(len(d["tool_calls"]) == 1 for d in deltas if "tool_calls" in d)
    first_call_at = next(i for i, d in enumerate(deltas) if "tool_calls" in d)
    assert all("content" not in d for d in deltas[first_call_at:])  # text before calls, never after
    assert [set(p) for p in pieces] == [{"index", "id", "type", "function"}, {"index", "function"}] * 2
    assert pieces[0]["index"] == 0 and pieces[2]["index"] == 1
    assert pieces[0]["function"] == {"name": "read_file", "arguments": ""} and pieces[0]["type"] == "function"
    assert json.loads(pieces[1]["function"]["arguments"]) == {"filePath": "/a.ts", "startLine": 10}
    assert json.loads(pieces[3]["function"]["arguments"]) == {"filePath": "/b.ts", "content": "x < y && z"}
    ids = [pieces[0]["id"], pieces[2]["id"]]
    assert all(i.startswith("call_") and len(i) == 29 and i[5:].isalnum() for i in ids) and ids[0] != ids[1]
    assert finishes[-1] == "tool_calls" and finishes[:-1] == [None] * (len(finishes) - 1)
    assert sse_chunks(body)[-1]["usage"]["total_tokens"] > 0


def test_the_sdk_stream_helper_assembles_several_calls(client):
    text = invoke("read_file", filePath="/a", startLine=1) + "\n" + invoke("read_file", filePath="/b", endLine="2.5")
    with client.chat.completions.stream(model="echo", messages=user(text), tools=TOOLS) as stream:
        final = stream.get_final_completion()
    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls"
    calls = choice.message.tool_calls
    assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == [
        ("read_file", {"filePath": "/a", "startLine": 1}), ("read_file", {"filePath": "/b", "endLine": 2.5})]


def test_non_streamed_tool_calls(client):
    reply = client.chat.completions.create(model="echo", tools=TOOLS,
                                           messages=user(invoke("read_file", filePath="/a", verbose="true")))
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    assert json.loads(choice.message.tool_calls[0].function.arguments) == {"filePath": "/a", "verbose": True}


def test_final_answer_is_plain_content(client):
    reply = client.chat.completions.create(model="echo", tools=TOOLS,
                                           messages=user(invoke("final_answer", answer="All done.")))
    assert reply.choices[0].message.content == "All done." and reply.choices[0].finish_reason == "stop"
    assert reply.choices[0].message.tool_calls is None


def test_tool_choice_none_parses_no_calls(client):
    text = invoke("read_file", filePath="/a")
    reply = client.chat.completions.create(model="echo", tools=TOOLS, tool_choice="none", messages=user(text))
    assert reply.choices[0].message.content == text and reply.choices[0].finish_reason == "stop"


def test_a_named_tool_choice_must_be_a_declared_tool(client):
    with pytest.raises(openai.BadRequestError) as error:
        client.chat.completions.create(model="echo", tools=TOOLS, messages=user("x"),
                                       tool_choice={"type": "function", "function": {"name": "nope"}})
    assert error.value.body["param"] == "tool_choice"


def test_undeclared_tools_stay_text(client):
    text = invoke("delete_everything", path="/")
    reply = client.chat.completions.create(model="echo", tools=TOOLS, messages=user(text))
    assert reply.choices[0].message.content == text


def test_hermes_and_json_fallbacks(client):
    text = '<tool_call>{"name": "read_file", "arguments": {"filePath": "/h", "startLine": "3"}}</tool_call>'
    reply = client.chat.completions.create(model="echo", tools=TOOLS, messages=user(text))
    assert json.loads(reply.choices[0].message.tool_calls[0].function.arguments) == {"filePath": "/h", "startLine": 3}
    text = '```json\n{"name": "create_file", "arguments": {"filePath": "/j"}}\n```'
    reply = client.chat.completions.create(model="echo", tools=TOOLS, messages=user(text))
    assert reply.choices[0].message.tool_calls[0].function.name == "create_file"


def test_a_full_round_trip(client):
    first = client.chat.completions.create(model="echo", tools=TOOLS,
                                           messages=user(invoke("read_file", filePath="/a")))
    call = first.choices[0].message.tool_calls[0]
    messages = user(invoke("read_file", filePath="/a")) + [
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": "The file says hello."}]
    answer = client.chat.completions.create(model="echo", tools=TOOLS, messages=messages)
    assert answer.choices[0].message.content == "The file says hello."
    assert answer.choices[0].finish_reason == "stop"


def tool_round(n: int) -> list[dict]:
    call_id = f"call_{n:024d}"
    return [{"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": "read_file", "arguments": '{"filePath": "/x"}'}}]},
        {"role": "tool", "tool_call_id": call_id, "content": invoke("read_file", filePath="/again")}]


@pytest.mark.parametrize("rounds, calls_allowed", [(24, True), (25, False)], ids=["below-limit", "at-limit"])
def test_the_step_limit(client, rounds, calls_allowed):
    # echo replies with the last message: a tool result that itself reads like a call
    messages = user("start") + [m for n in range(rounds) for m in tool_round(n)]
    reply = client.chat.completions.create(model="echo", tools=TOOLS, messages=messages)
    assert (reply.choices[0].message.tool_calls is not None) == calls_allowed
    assert reply.choices[0].finish_reason == ("tool_calls" if calls_allowed else "stop")


def test_ollama_client_gets_object_arguments(base_url):
    client = ollama.Client(host=base_url)
    text = invoke("read_file", filePath="/a", startLine=7)
    streamed = [p for p in client.chat("echo", messages=user(text), tools=TOOLS, stream=True)]
    calls = [c for p in streamed for c in (p.message.tool_calls or [])]
    assert [(c.function.name, c.function.arguments) for c in calls] == [("read_file", {"filePath": "/a", "startLine": 7})]
    assert all(p.message.role == "assistant" for p in streamed) and streamed[-1].done
    reply = client.chat("echo", messages=user(text), tools=TOOLS)
    assert reply.message.tool_calls[0].function.arguments == {"filePath": "/a", "startLine": 7}
    # a round trip in Ollama's shape: calls without ids, results by tool_name
    messages = user(text) + [{"role": "assistant", "content": "", "tool_calls": [
        {"function": {"name": "read_file", "arguments": {"filePath": "/a"}}}]},
        {"role": "tool", "tool_name": "read_file", "content": "contents"}]
    assert client.chat("echo", messages=messages, tools=TOOLS).message.content == "contents"


def test_show_lists_tools_for_agent_mode(base_url):
    assert "tools" in ollama.Client(host=base_url).show("smollm2:135m").capabilities


def test_copilot_follow_up_turn_with_parallel_tool_results(base_url, copilot_fixture):
    follow_up = copilot_fixture["follow_up_turn"]
    status, _, body = post_raw(base_url, "/v1/chat/completions", follow_up | {"model": "echo"},
                               copilot_fixture["headers"])
    assert status == 200
    chunks = sse_chunks(body)
    # echo answers with the new user message, which holds no call
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    last = follow_up["messages"][-1]["content"]
    assert text == (last if isinstance(last, str) else "".join(p["text"] for p in last))
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
