"""Every JSON route fuzzed with hypothesis through the real stack: whatever a
client sends, the answer is never a 5xx and every stream ends."""
from __future__ import annotations

import json
import threading

import httpx
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from scripts.processes import stack_env, start_web

ROUTES = ["/api/chat", "/api/generate", "/api/show", "/v1/chat/completions", "/v1/completions",
          "/chat/completions", "/chat/sse"]
MODELS = st.sampled_from(["echo", "echo:coder", "echo:slow", "nope", "", "smollm2:135m"])
# Huge numbers, lone surrogates and deep nesting are what broke the server before (issue 13).
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.floats(allow_nan=False, allow_infinity=False),
                    st.text(max_size=40), st.integers(min_value=10**18, max_value=10**400), st.sampled_from([1e300, -1e300]),
                    st.text(alphabet=st.characters(categories=["Cs"]), min_size=1, max_size=3),
                    st.builds(lambda text, surrogate: text + surrogate, st.text(max_size=10),
                              st.characters(categories=["Cs"])))
JSON = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                     st.dictionaries(st.text(max_size=12), inner, max_size=4)),
                    max_leaves=12)
MESSAGE = st.fixed_dictionaries({"role": st.sampled_from(["user", "system", "assistant", "tool", "bogus"]),
                                 "content": st.one_of(st.text(max_size=60), JSON)})
OPTIONS = st.dictionaries(st.sampled_from(["num_predict", "temperature", "top_k", "top_p", "stop", "seed",
                                           "num_ctx", "min_p", "repeat_penalty"]), SCALARS, max_size=4)
def _nest(levels: int, leaf):
    for _ in range(levels):
        leaf = [leaf]
    return leaf


DEEP = st.builds(_nest, st.integers(0, 500), st.integers(0, 9))
BODY = st.one_of(
    JSON,
    st.fixed_dictionaries({"model": MODELS, "messages": DEEP}),
    st.fixed_dictionaries({"model": MODELS, "tools": st.lists(st.fixed_dictionaries({
        "type": st.just("function"), "function": st.fixed_dictionaries({"name": st.just("f"), "parameters": DEEP})}),
        max_size=1)}),
    st.fixed_dictionaries({"model": MODELS}, optional={
        "messages": st.one_of(st.lists(MESSAGE, max_size=4), JSON), "prompt": st.one_of(st.text(max_size=60), JSON),
        "suffix": SCALARS, "raw": SCALARS, "stream": SCALARS, "options": st.one_of(OPTIONS, JSON),
        "tools": JSON, "tool_choice": JSON, "format": JSON, "response_format": JSON, "max_tokens": SCALARS,
        "keep_alive": SCALARS, "template": SCALARS, "system": SCALARS, "images": JSON, "n": SCALARS,
        "stream_options": JSON, "stop": SCALARS, "echo": SCALARS}),
)


@pytest.mark.parametrize("route", ROUTES)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=BODY)
def test_no_5xx_and_no_hung_stream(stack, route, body):
    # options are capped so that a fuzzed request to the real model stays short
    if isinstance(body, dict) and body.get("model") == "smollm2:135m":
        body["options"] = {"num_predict": 2}
        body["max_tokens"] = 2
    raw = json.dumps(body).encode()  # ASCII escapes: lone surrogates travel as \\udXXX, as clients send them
    with httpx.stream("POST", stack + route, content=raw, headers={"Content-Type": "application/json"},
                      timeout=httpx.Timeout(30)) as response:
        assert response.status_code < 500, response.read()
        for _ in response.iter_bytes():  # the stream must end (the timeout would fail the test)
            pass


# --- the agents' dialects: every position of a valid body, type-confused ------------
# Valid bodies holding every kind of block and item the routes read, each
# mutated at every position (a field replaced by each odd value, removed, or
# an odd field added beside it): a `type` that is a list broke the
# discriminators once (issue 41). Tool schemas are mutated at their root
# only: below it they are the client's JSON Schema, passed on as it is.
ODD = [[1], {"a": 1}, None, "x", -1, True]  # each JSON type: array, object, null, string, number, boolean
IMAGE = {"type": "base64", "media_type": "image/png",
         "data": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="}
MESSAGES = {
    "model": "echo", "max_tokens": 16, "stream": False, "system": [{"type": "text", "text": "be brief"}],
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm", "signature": "s"},
                                          {"type": "redacted_thinking", "data": "xyz"},
                                          {"type": "tool_use", "id": "t1", "name": "get", "input": {"a": 1}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                      "content": [{"type": "text", "text": "42"}]}]},
        {"role": "user", "content": "and now?"}],
    "tools": [{"name": "get", "description": "d", "input_schema": {"type": "object"}}],
    "tool_choice": {"type": "auto"}, "metadata": {"user_id": "u"}, "thinking": {"type": "enabled", "budget_tokens": 8},
    "output_config": {"effort": "low"}, "stop_sequences": ["zz"], "temperature": 0.5, "top_p": 0.9, "top_k": 5,
}
COUNT_TOKENS = {k: v for k, v in MESSAGES.items() if k not in ("max_tokens", "stream")}
# echo takes no images: these are refused (400) after their blocks are read.
MESSAGES_IMAGE = {"model": "echo", "max_tokens": 16, "messages": [
    {"role": "user", "content": [{"type": "text", "text": "what is it?"}, {"type": "image", "source": IMAGE}]}]}
RESPONSES = {
    "model": "echo", "stream": False, "store": False, "instructions": "be brief", "max_output_tokens": 16,
    "input": [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "rules"}]},
        {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "hm"}]},
        {"type": "function_call", "call_id": "c1", "name": "get", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "42"},
        {"type": "custom_tool_call", "call_id": "c2", "name": "apply_patch", "input": "*** Begin Patch"},
        {"type": "custom_tool_call_output", "call_id": "c2", "output": "done"},
        {"type": "local_shell_call", "call_id": "c3", "action": {"type": "exec", "command": ["ls"]},
         "status": "completed"},
        {"type": "local_shell_call_output", "call_id": "c3", "output": "a b"}],
    "tools": [{"type": "function", "name": "get", "parameters": {"type": "object"}},
              {"type": "custom", "name": "apply_patch", "format": {"type": "grammar", "syntax": "lark",
                                                                  "definition": "start: /.+/"}},
              {"type": "web_search"}],
    "tool_choice": "auto", "parallel_tool_calls": True, "reasoning": {"effort": "low", "summary": "auto"},
    "include": ["reasoning.encrypted_content"], "text": {"format": {"type": "text"}}, "prompt_cache_key": "k",
    "temperature": 0.5, "top_p": 0.9, "metadata": {"a": "b"}, "background": False, "generate": True,
}
CUSTOM_TOOL = {"type": "custom", "custom": {"name": "apply_patch", "description": "d", "format": {
    "type": "grammar", "grammar": {"syntax": "lark", "definition": "start: /.+/"}}}}
CHAT = {
    "model": "echo", "max_tokens": 16, "stream": False, "messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "text", "text": "there"}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get", "arguments": "{}"}},
            {"id": "c2", "type": "custom", "custom": {"name": "apply_patch", "input": "*** Begin Patch"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "42"},
        {"role": "tool", "tool_call_id": "c2", "content": "done"},
        {"role": "user", "content": "and now?"}],
    "tools": [{"type": "function", "function": {"name": "get", "parameters": {"type": "object"}}}, CUSTOM_TOOL],
    "tool_choice": "auto", "parallel_tool_calls": True, "temperature": 0.5, "stream_options": {"include_usage": True},
}
RESPONSES_IMAGE = {"model": "echo", "input": [{"role": "user", "content": [
    {"type": "input_text", "text": "what is it?"},
    {"type": "input_image", "image_url": "data:image/png;base64," + IMAGE["data"]}]}]}
GEMINI = {
    "contents": [
        {"role": "user", "parts": [{"text": "hi"}, {"text": "there"}]},
        {"role": "model", "parts": [{"text": "hm", "thought": True}, {
            "functionCall": {"id": "c1", "name": "get", "args": {"a": 1}}, "thoughtSignature": "c2ln"}]},
        {"role": "user", "parts": [{"functionResponse": {"id": "c1", "name": "get", "response": {"output": "42"}}}]},
        {"role": "user", "parts": [{"text": "and now?"}]}],
    "systemInstruction": {"parts": [{"text": "be brief"}]},
    "tools": [{"functionDeclarations": [{"name": "get", "description": "d", "parameters": {"type": "OBJECT"}},
                                        {"name": "put", "parametersJsonSchema": {"type": "object"}}]},
              {"googleSearch": {}}],
    "toolConfig": {"functionCallingConfig": {"mode": "AUTO", "allowedFunctionNames": ["get", "put"]}},
    "generationConfig": {"temperature": 0.5, "topP": 0.9, "topK": 5, "maxOutputTokens": 16, "stopSequences": ["zz"],
                         "seed": 1, "candidateCount": 1, "responseMimeType": "application/json",
                         "responseSchema": {"type": "OBJECT", "properties": {"n": {"type": "INTEGER"}}},
                         "thinkingConfig": {"includeThoughts": True, "thinkingBudget": 8}},
    "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}],
}
GEMINI_COUNT = {"generateContentRequest": GEMINI | {"model": "models/echo"}}
GEMINI_IMAGE = {"contents": [{"role": "user", "parts": [
    {"text": "what is it?"}, {"inlineData": {"mimeType": "image/png", "data": IMAGE["data"]}}]}]}


def opaque(path: tuple) -> bool:
    """Below a tool's schema or a tool call's arguments: the client's own JSON."""
    return bool(path) and (path[-1] in ("input_schema", "parameters", "parametersJsonSchema")
                           or path[-1] == "input" and len(path) > 1)


def positions(value, path=()):
    """Every path into a JSON value (not below an opaque one)."""
    yield path
    if opaque(path):
        return
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        yield from positions(child, (*path, key))


def mutants(body: dict):
    """(what changed, the body) for each odd value at each position, and
    each position removed."""
    for path in positions(body):
        if not path:
            continue
        for odd in ODD:
            yield f"{path}={odd!r}"[:120], _changed(body, path, lambda parent, key, odd=odd: parent.__setitem__(key, odd))
        yield f"{path} removed", _changed(body, path, lambda parent, key: parent.pop(key))


def _changed(body: dict, path: tuple, change) -> dict:
    copy = json.loads(json.dumps(body))
    parent = copy
    for key in path[:-1]:
        parent = parent[key]
    change(parent, path[-1])
    return copy


def _status(client: httpx.Client, route: str, body: dict) -> int:
    with client.stream("POST", route, json=body) as response:
        for _ in response.iter_bytes():  # a stream must end (the timeout would fail the test)
            pass
        return response.status_code


@pytest.fixture(scope="module")
def unlimited(stack, redis_url):
    """A web process beside the session's worker whose people may send as
    many requests a minute as the fuzz does (thousands): a base case is then
    never a 429 because the cases before it used up the minute."""
    web, base = start_web(stack_env(redis_url, SWITCHBOARD_REQUESTS_PER_MINUTE="1000000"))
    yield base
    web.stop()


@pytest.mark.parametrize("route, body, status", [
    ("/v1/chat/completions", CHAT, 200),
    ("/v1/messages", MESSAGES, 200), ("/v1/messages/count_tokens", COUNT_TOKENS, 200), ("/v1/responses", RESPONSES, 200),
    ("/v1/responses/compact", RESPONSES, 200), ("/v1/messages", MESSAGES_IMAGE, 400),
    ("/v1/responses", RESPONSES_IMAGE, 400),
    ("/v1beta/models/echo:generateContent", GEMINI, 200), ("/v1beta/models/echo:countTokens", GEMINI_COUNT, 200),
    ("/v1beta/models/echo:streamGenerateContent?alt=sse", GEMINI, 200),
    ("/v1beta/models/echo:generateContent", GEMINI_IMAGE, 400),
], ids=["chat", "messages", "count_tokens", "responses", "compact", "messages-image", "responses-image", "gemini",
        "gemini-count", "gemini-stream", "gemini-image"])
def test_type_confused_values_in_every_position_of_the_agents_dialects(unlimited, route, body, status):
    from concurrent.futures import ThreadPoolExecutor

    clients = threading.local()

    def status_of(case: dict) -> int:
        if not hasattr(clients, "client"):
            clients.client = httpx.Client(base_url=unlimited, timeout=httpx.Timeout(30))
        return _status(clients.client, route, case)
    assert status_of(body) == status  # the body itself is answered as it should be
    cases = list(mutants(body))
    with ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(lambda case: status_of(case[1]), cases))
    failed = [(what, status) for (what, _), status in zip(cases, statuses) if status >= 500]
    assert not failed, f"{len(failed)} of {len(cases)} mutants got a 5xx: {failed[:10]}"
    assert len(cases) > (300 if status == 200 else 50)


CUSTOM_FIELDS = [(("tools", 1, "custom", "format"), dict), (("tools", 1, "custom", "format", "grammar"), dict),
                 (("tools", 1, "custom", "format", "grammar", "definition"), str),
                 (("tools", 1, "custom", "format", "type"), str), (("tools", 1, "custom", "name"), str),
                 (("messages", 2, "tool_calls", 1, "custom", "input"), str),
                 (("messages", 2, "tool_calls", 1, "custom"), dict)]


@pytest.mark.parametrize("path, kind", CUSTOM_FIELDS, ids=lambda v: ".".join(map(str, v)) if isinstance(v, tuple) else "")
def test_a_custom_tools_field_of_a_wrong_type_is_a_400_naming_it(unlimited, path, kind):
    for odd in [value for value in ODD if value is not None and not isinstance(value, kind)]:
        response = httpx.post(unlimited + "/v1/chat/completions", json=_changed(
            CHAT, path, lambda parent, key, odd=odd: parent.__setitem__(key, odd)), timeout=30)
        assert response.status_code == 400, (odd, response.text)
        assert response.json()["error"]["param"].startswith(".".join(map(str, path))), (odd, response.text)


def test_type_confused_frames_on_the_responses_websocket(unlimited):
    """The same mutants as response.create messages (the frame's own `type`
    among the positions), on 8 sockets: each ends with a terminal event,
    none an error of status 5xx, and the sockets stay usable throughout."""
    from concurrent.futures import ThreadPoolExecutor

    from websockets.sync.client import connect

    frame = {"type": "response.create"} | RESPONSES
    cases = list(mutants(frame))
    sockets, opened = threading.local(), []

    def terminal(case: dict) -> dict:
        if not hasattr(sockets, "ws"):
            sockets.ws = connect(unlimited.replace("http://", "ws://") + "/v1/responses")
            opened.append(sockets.ws)
        sockets.ws.send(json.dumps(case))
        while (event := json.loads(sockets.ws.recv(timeout=30)))["type"] not in (
                "response.completed", "response.incomplete", "response.failed", "error"):
            pass
        return event

    try:
        assert terminal(frame)["type"] == "response.completed"
        with ThreadPoolExecutor(8) as pool:
            ends = list(pool.map(lambda case: terminal(case[1]), cases))
    finally:
        for ws in opened:
            ws.close()
    failed = [(what, end) for (what, _), end in zip(cases, ends) if end["type"] == "error" and end["status"] >= 500]
    assert not failed, f"{len(failed)} of {len(cases)} mutants got a 5xx: {failed[:5]}"
    assert len(cases) > 300 and sum(end["type"] == "error" for end in ends) > 100
