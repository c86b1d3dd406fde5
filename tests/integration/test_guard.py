"""Secrets kept from hosted models, end to end: the upstream stack's guarded
models send to a recording relay (tests/integration/recording_relay.py)
that passes each request on to the session's echo, so the test reads
exactly what a hosted model got and the client gets a real reply. Echo
answers with the last turn as it got it (the redacted tool result): the
client must get its own text back, values restored.

Every client dialect with its official client (openai: chat, Responses,
completions, embeddings; anthropic; ollama; google-genai) and the simple
chat API, each upstream kind, a tool call that writes a file, block mode's
400 in each dialect, the defaults (an upstream inside the operator's
networks, a local model), and the records."""
from __future__ import annotations

import json
import uuid

import anthropic
import httpx
import ollama
import openai
import pytest
from google import genai
from google.genai import types
from websockets.sync.client import connect

from guard.placeholders import PLACEHOLDER
from ledger import request_log
from tests.guard_secrets import DB_PASSWORD, ENV_FILE, PRIVATE_KEY, VALUES, leaked
from tests.integration.waits import wait_until

ALL = sorted(leaked(ENV_FILE))  # each secret, and the private key's body line
WRITE_TOOL = {"type": "function", "function": {"name": "write_file", "description": "Write a file", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}}}


@pytest.fixture
def up(upstreams, clean_redis):
    return upstreams


def relayed(up, since: int) -> str:
    return up["relay"].sent(since)


def mark(up) -> int:
    return len(up["relay"].requests)


def openai_client(base: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0)


def chat_history(model: str = "guard-openai") -> dict:
    """A turn whose tool result shows the project's .env (as an agent's read tool returns it)."""
    call = {"id": "call_1", "type": "function", "function": {"name": "read_file",
                                                             "arguments": json.dumps({"path": "/srv/app/.env"})}}
    return {"model": model, "messages": [
        {"role": "user", "content": "deploy it"}, {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": ENV_FILE}]}


# --- each client dialect, with its official client ---------------------------------------------------------

def via_openai_chat(base: str, stream: bool) -> str:
    client = openai_client(base)
    if not stream:
        return client.chat.completions.create(**chat_history()).choices[0].message.content
    chunks = client.chat.completions.create(**chat_history(), stream=True)
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


def via_responses(base: str, stream: bool) -> str:
    items = [{"role": "user", "content": "deploy it"},
             {"type": "function_call", "call_id": "c1", "name": "read_file", "arguments": '{"path": ".env"}'},
             {"type": "function_call_output", "call_id": "c1", "output": ENV_FILE}]
    client = openai_client(base)
    if not stream:
        return client.responses.create(model="guard-openai", input=items).output_text
    return "".join(e.delta for e in client.responses.create(model="guard-openai", input=items, stream=True)
                   if e.type == "response.output_text.delta")


def via_completions(base: str, stream: bool) -> str:
    return openai_client(base).completions.create(model="guard-openai", prompt=ENV_FILE, max_tokens=500).choices[0].text


def via_anthropic(base: str, stream: bool) -> str:
    client = anthropic.Anthropic(base_url=base, api_key="unused", max_retries=0)
    messages = [{"role": "user", "content": "deploy it"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Read",
                                                   "input": {"file_path": "/srv/app/.env"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": ENV_FILE}]}]
    if not stream:
        return client.messages.create(model="guard-openai", max_tokens=2000, messages=messages).content[0].text
    with client.messages.stream(model="guard-openai", max_tokens=2000, messages=messages) as events:
        return events.get_final_text()


def via_ollama(base: str, stream: bool) -> str:
    messages = [{"role": "user", "content": "deploy it"},
                {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "read_file",
                                                                                  "arguments": {"path": ".env"}}}]},
                {"role": "tool", "content": ENV_FILE, "tool_name": "read_file"}]
    reply = ollama.Client(host=base).chat("guard-openai", messages=messages, stream=stream)
    return "".join(part.message.content for part in reply) if stream else reply.message.content


def via_gemini(base: str, stream: bool) -> str:
    client = genai.Client(api_key="unused", http_options=types.HttpOptions(base_url=base))
    contents = [types.Content(role="user", parts=[types.Part(text="deploy it")]),
                types.Content(role="model", parts=[types.Part(function_call=types.FunctionCall(
                    id="c1", name="read_file", args={"path": ".env"}))]),
                types.Content(role="user", parts=[types.Part(function_response=types.FunctionResponse(
                    id="c1", name="read_file", response={"output": ENV_FILE}))])]
    if not stream:
        return client.models.generate_content(model="guard-openai", contents=contents).text
    return "".join(c.text or "" for c in client.models.generate_content_stream(model="guard-openai",
                                                                              contents=contents))


def via_simple_chat(base: str, stream: bool) -> str:
    body = {"model": "guard-openai", "messages": [{"role": "user", "content": ENV_FILE}], "stream": stream}
    reply = httpx.post(f"{base}/chat/completions", json=body, timeout=60)
    if not stream:
        return reply.json()["message"]["content"]
    return "".join(json.loads(line)["message"]["content"] for line in reply.text.splitlines())


DIALECTS = {"openai-chat": via_openai_chat, "responses": via_responses, "completions": via_completions,
            "anthropic": via_anthropic, "ollama": via_ollama, "gemini": via_gemini, "simple-chat": via_simple_chat}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("dialect", DIALECTS)
def test_no_secret_reaches_the_upstream_and_the_client_gets_its_values_back(up, dialect, stream):
    since = mark(up)
    reply = DIALECTS[dialect](up["base"], stream)
    sent = relayed(up, since)
    assert sent and leaked(sent) == [], f"the upstream got {leaked(sent)}"
    assert len(set(PLACEHOLDER.findall(sent))) == 4  # the key id and secret, the password, the private key
    assert sorted(leaked(reply)) == ALL and PLACEHOLDER.search(reply) is None  # echo's answer, restored


@pytest.mark.parametrize("model", ["guard-openai", "guard-ollama", "guard-anthropic", "guard-gemini"],
                         ids=["openai", "ollama", "anthropic", "gemini"])
def test_each_upstream_kind_gets_placeholders_and_the_next_turn_the_same(up, model):
    client, since = openai_client(up["base"]), mark(up)
    history = chat_history(model)
    first = client.chat.completions.create(**history).choices[0].message.content
    sent_first = relayed(up, since)
    assert leaked(sent_first) == [] and sorted(leaked(first)) == ALL
    since = mark(up)
    history["messages"] += [{"role": "assistant", "content": first}, {"role": "user", "content": "thanks"}]
    assert client.chat.completions.create(**history).choices[0].message.content == "thanks"
    sent_second = relayed(up, since)
    assert leaked(sent_second) == []
    assert set(PLACEHOLDER.findall(sent_second)) == set(PLACEHOLDER.findall(sent_first))  # the prefix stays warm


def test_a_file_writing_call_gets_the_real_values(up):
    """The tool result holds the model's next move, a call of the client's write_file tool with the file's
    content: the upstream calls it with placeholders, the client gets the values."""
    write = ('<invoke name="write_file"><parameter name="path">/srv/app/.env.backup</parameter>'
             f"<parameter name=\"content\">{ENV_FILE}</parameter></invoke>")
    history = chat_history() | {"tools": [WRITE_TOOL]}
    history["messages"][-1]["content"] = write
    since = mark(up)
    for stream in (False, True):
        if stream:
            chunks = list(openai_client(up["base"]).chat.completions.create(**history, stream=True))
            arguments = "".join(c.choices[0].delta.tool_calls[0].function.arguments or ""
                                for c in chunks if c.choices and c.choices[0].delta.tool_calls)
        else:
            reply = openai_client(up["base"]).chat.completions.create(**history).choices[0].message
            arguments = reply.tool_calls[0].function.arguments
        assert json.loads(arguments)["content"].strip() == ENV_FILE.strip()
    assert leaked(relayed(up, since)) == []


def test_embeddings_send_placeholders(up):
    since = mark(up)
    vectors = openai_client(up["base"]).embeddings.create(model="guard-embed", input=["hello", ENV_FILE])
    assert len(vectors.data) == 2
    sent = relayed(up, since)
    assert leaked(sent) == [] and PLACEHOLDER.search(sent)


# --- block ----------------------------------------------------------------------------------------------------

GEMINI = "/v1beta/models/guard-block:generateContent"
BLOCKED = [  # (path, body, how the dialect words a 400)
    ("/v1/chat/completions", chat_history("guard-block"), lambda b: b["error"]["type"] == "invalid_request_error"),
    ("/v1/chat/completions", chat_history("guard-block") | {"stream": True},
     lambda b: b["error"]["type"] == "invalid_request_error"),
    ("/v1/responses", {"model": "guard-block", "input": ENV_FILE},
     lambda b: b["error"]["type"] == "invalid_request_error"),
    ("/v1/messages", {"model": "guard-block", "max_tokens": 10, "messages": [{"role": "user", "content": ENV_FILE}]},
     lambda b: b["type"] == "error" and b["error"]["type"] == "invalid_request_error"),
    ("/v1/messages", {"model": "guard-block", "max_tokens": 10, "stream": True,
                      "messages": [{"role": "user", "content": ENV_FILE}]},
     lambda b: b["type"] == "error" and b["error"]["type"] == "invalid_request_error"),
    ("/api/chat", {"model": "guard-block", "messages": [{"role": "user", "content": ENV_FILE}]},
     lambda b: list(b) == ["error"]),
    ("/api/generate", {"model": "guard-block", "prompt": ENV_FILE}, lambda b: list(b) == ["error"]),
    (GEMINI, {"contents": [{"role": "user", "parts": [{"text": ENV_FILE}]}]},
     lambda b: b["error"]["status"] == "INVALID_ARGUMENT" and b["error"]["code"] == 400),
    ("/chat/completions", {"model": "guard-block", "messages": [{"role": "user", "content": ENV_FILE}]},
     lambda b: b["error"]["type"] == "invalid_request_error"),
]


def message_of(body: dict) -> str:
    error = body["error"]
    return error if isinstance(error, str) else error["message"]


@pytest.mark.parametrize("path,body,shaped", BLOCKED, ids=["chat", "chat-stream", "responses", "messages",
                                                            "messages-stream", "ollama-chat", "ollama-generate",
                                                            "gemini", "simple-chat"])
def test_block_is_each_dialects_400_naming_kinds_and_places_never_values(up, path, body, shaped):
    since = mark(up)
    reply = httpx.post(up["base"] + path, json=body, timeout=60)
    assert reply.status_code == 400, reply.text
    answer = reply.json()
    assert shaped(answer) and leaked(reply.text) == []
    message = message_of(answer)
    assert "aws-key" in message and "private-key" in message and "password-in-url" in message
    assert relayed(up, since) == ""  # nothing went upstream


def test_block_names_the_file_a_tool_result_came_from(up):
    reply = httpx.post(up["base"] + "/v1/chat/completions", json=chat_history("guard-block"), timeout=60)
    assert "aws-key in message 2 (tool result of read_file, file /srv/app/.env)" in reply.json()["error"]["message"]


# --- defaults -----------------------------------------------------------------------------------------------

def test_an_upstream_inside_the_operators_networks_is_untouched_by_default(up):
    since = mark(up)
    reply = openai_client(up["base"]).chat.completions.create(**chat_history("guard-default"))
    assert sorted(leaked(relayed(up, since))) == ALL and reply.choices[0].message.content == ENV_FILE


def test_a_local_model_is_untouched_by_default(base_url, redis_client):
    """echo answers with what it got: the values, not placeholders; the local model's request leaves nothing
    of the guard behind either."""
    client = openai_client(base_url)
    reply = client.chat.completions.create(model="echo", messages=[{"role": "user", "content": ENV_FILE}])
    assert reply.choices[0].message.content == ENV_FILE
    local = client.chat.completions.create(model="smollm2:135m", max_tokens=1, messages=[
        {"role": "user", "content": ENV_FILE}])
    assert local.choices[0].finish_reason in ("length", "stop")
    assert redis_client.keys("switchboard:guard:*") == [] and not redis_client.hgetall(
        "switchboard:metrics:guard_findings")


# --- records --------------------------------------------------------------------------------------------------

def test_records_say_what_was_found_for_whom_never_a_value(up, redis_client):
    """(A conversation of its own: what the worker scanned in earlier tests counted then.)"""
    history = chat_history()
    history["messages"][-1]["content"] = f"# {uuid.uuid4()}\n{ENV_FILE}"
    openai_client(up["base"]).chat.completions.create(**history)
    httpx.post(up["base"] + "/v1/chat/completions", json=chat_history("guard-block"), timeout=60)
    rows = wait_until(lambda: [r for r in request_log.read(redis_client, request_log.Filter())[0]
                               if r["guard"]] if len([r for r in request_log.read(
                                   redis_client, request_log.Filter())[0] if r["guard"]]) >= 2 else None,
                      what="both requests' records")
    kinds = {"aws-key": 1, "secret-assignment": 1, "password-in-url": 1, "private-key": 1}
    assert {(r["model"], r["guard"]["action"], r["status"]) for r in rows} == {
        ("guard-openai", "redacted", 200), ("guard-block", "blocked", 400)}
    assert all(r["guard"]["kinds"] == kinds for r in rows)
    audit = [json.loads(f[b"entry"]) for _, f in redis_client.xrange("switchboard:audit")]
    found = {(e["action"], e["target"]) for e in audit if e["action"].startswith("secrets")}
    assert found == {("secrets redacted", "guard-openai"), ("secrets blocked", "guard-block")}
    metrics = httpx.get(up["base"] + "/metrics").text
    assert 'switchboard_guard_findings_total{action="redacted",kind="aws-key"} 1.0' in metrics
    assert 'switchboard_guard_findings_total{action="blocked",kind="private-key"} 1.0' in metrics
    console = httpx.get(up["base"] + "/admin/status").json()["guard_today"]
    assert {(row["model"], row["kind"], row["action"], row["count"]) for row in console} >= {
        ("guard-openai", "aws-key", "redacted", 1), ("guard-block", "private-key", "blocked", 1)}
    everything = json.dumps([rows, audit, console]) + metrics
    assert leaked(everything) == [] and DB_PASSWORD not in everything and PRIVATE_KEY[40:80] not in everything
    assert all(v not in everything for v in VALUES)


def test_the_responses_websocket_sends_placeholders_and_the_next_turn_the_same(up):
    """Codex's native transport: its second turn names the first by previous_response_id and sends only
    what is new; the conversation rebuilt from the stored response carries the same placeholders."""
    items = [{"type": "function_call", "call_id": "c1", "name": "read_file", "arguments": '{"path": ".env"}'},
             {"type": "function_call_output", "call_id": "c1", "output": ENV_FILE}]
    since = mark(up)
    with connect(up["base"].replace("http://", "ws://", 1) + "/v1/responses") as ws:
        first = ws_turn(ws, {"model": "guard-openai", "input": items})
        assert first["response"]["status"] == "completed"
        text = first["response"]["output"][0]["content"][0]["text"]
        assert sorted(leaked(text)) == ALL
        sent_first = relayed(up, since)
        since = mark(up)
        second = ws_turn(ws, {"model": "guard-openai", "previous_response_id": first["response"]["id"],
                              "input": [{"role": "user", "content": "thanks"}]})
        assert second["response"]["status"] == "completed"
    sent_second = relayed(up, since)
    assert leaked(sent_first) == [] and leaked(sent_second) == []
    assert set(PLACEHOLDER.findall(sent_second)) == set(PLACEHOLDER.findall(sent_first)) and \
        len(set(PLACEHOLDER.findall(sent_first))) == 4


def ws_turn(ws, body: dict) -> dict:
    ws.send(json.dumps({"type": "response.create"} | body))
    while True:
        event = json.loads(ws.recv(timeout=60))
        if event["type"] in ("response.completed", "response.failed", "response.incomplete", "error"):
            return event
