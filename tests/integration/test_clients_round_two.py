"""What Copilot, the Ollama ecosystem and the OpenAI SDKs tripped over
(issue 12), each driven as the client drives the server: the official
client where there is one, else the exact bytes the client sends."""
from __future__ import annotations

import httpx
import ollama
import openai
import pytest

from tests.integration.http import post_raw

TWO_CALLS = ('<invoke name="read_file"><parameter name="path">a.py</parameter></invoke>\n'
             '<invoke name="read_file"><parameter name="path">b.py</parameter></invoke>')
READ_FILE = [{"type": "function", "function": {"name": "read_file", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}]


def copilot_budget(context: int) -> tuple[int, int]:
    """Copilot's arithmetic (ollamaProvider.ts, byokProvider.ts): output 4096,
    or half a context below 4096; input the rest; an input of 0 means 100,000."""
    output = 4096 if context >= 4096 else context // 2
    return (context - output) or 100_000, output


# --- Copilot --------------------------------------------------------------------------
def test_every_model_has_its_own_display_name(base_url):
    client = ollama.Client(host=base_url)
    names = {m.model: client.show(m.model).modelinfo["general.basename"] for m in client.list().models}
    assert names["echo"] == "echo" and names["echo:slow"] == "echo:slow" and names["echo:coder"] == "echo:coder"
    assert len(set(names.values())) == len(names)


def test_the_served_context_is_reported_and_gives_copilot_a_budget_that_fits(base_url):
    client = ollama.Client(host=base_url)
    info = client.show("smollm2:135m").modelinfo
    context = info[f"{info['general.architecture']}.context_length"]
    assert context == 8192  # served with its trained context, and said so
    prompt_budget, output_budget = copilot_budget(context)
    assert prompt_budget + output_budget <= context and prompt_budget == 4096


# --- Ollama clients -------------------------------------------------------------------
@pytest.mark.parametrize("method, path", [
    # (the embedding routes, once examples here, are served since issue 16)
    ("POST", "/api/rerank"), ("POST", "/v1/rerank"), ("POST", "/v1/images/generations"), ("GET", "/nowhere"),
    ("POST", "/api/chat/extra"), ("GET", "/api/chat"), ("PUT", "/v1/chat/completions"), ("GET", "/chat/x"),
], ids=["rerank", "v1-rerank", "v1-images", "unknown", "deeper", "get-chat", "put", "simple"])
def test_every_answer_is_json_in_the_dialect_of_its_path(base_url, method, path):
    response = httpx.request(method, base_url + path, json={"model": "echo"})
    assert response.status_code in (404, 405) and response.headers["content-type"] == "application/json"
    error = response.json()["error"]
    message = error if path.startswith("/api/") else error["message"]
    assert path in message and method in message


def test_pull_of_a_served_model_streams_ollamas_statuses(base_url):
    client = ollama.Client(host=base_url)
    statuses = [progress.status for progress in client.pull("echo", stream=True)]
    assert statuses[0] == "pulling manifest" and statuses[-1] == "success"
    assert client.pull("echo:latest").status == "success"
    with pytest.raises(ollama.ResponseError) as missing:
        client.pull("llama3:70b")
    assert missing.value.status_code == 404 and "file does not exist" in missing.value.error


@pytest.mark.parametrize("call", [
    lambda c: c.create(model="mine", from_="echo"), lambda c: c.delete("echo"), lambda c: c.copy("echo", "echo2"),
    lambda c: c.push("echo")], ids=["create", "delete", "copy", "push"])
def test_model_management_says_models_live_in_the_registry(base_url, call):
    with pytest.raises(ollama.ResponseError) as refused:
        call(ollama.Client(host=base_url))
    assert refused.value.status_code == 403 and "registry" in refused.value.error


def test_an_empty_prompt_with_keep_alive_zero_unloads(base_url):
    reply = ollama.Client(host=base_url).generate("echo", prompt="", keep_alive=0)
    assert reply.done and reply.done_reason == "unload"


def test_thinking_on_a_model_without_it_is_ollamas_400(base_url):
    with pytest.raises(ollama.ResponseError) as refused:
        ollama.Client(host=base_url).chat("echo", messages=[{"role": "user", "content": "hi"}], think=True)
    assert refused.value.status_code == 400 and refused.value.error == '"echo" does not support thinking'


def test_the_last_generate_object_carries_context(base_url):
    reply = ollama.Client(host=base_url).generate("echo", prompt="hello there")
    assert reply.response == "hello there" and reply.context == []
    raw = ollama.Client(host=base_url).generate("echo", prompt="x", raw=True)
    assert raw.context is None  # Ollama sends none in raw mode


# --- OpenAI semantics -----------------------------------------------------------------
@pytest.fixture
def oai(base_url):
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key="none", max_retries=0)


def test_text_parts_reach_the_model_as_one_turn(oai):
    reply = oai.chat.completions.create(model="echo", messages=[{"role": "user", "content": [
        {"type": "text", "text": "part one"}, {"type": "text", "text": "part two"}]}])
    # echo answers the whole turn: one message, its parts on lines of their own, not "part onepart two"
    assert reply.choices[0].message.content == "part one\npart two" and reply.usage.prompt_tokens == 4


def test_parallel_tool_calls_false_gives_at_most_one_call(oai):
    both = oai.chat.completions.create(model="echo", tools=READ_FILE, messages=[{"role": "user", "content": TWO_CALLS}])
    assert len(both.choices[0].message.tool_calls) == 2
    one = oai.chat.completions.create(model="echo", tools=READ_FILE, parallel_tool_calls=False,
                                      messages=[{"role": "user", "content": TWO_CALLS}])
    calls = one.choices[0].message.tool_calls
    assert len(calls) == 1 and calls[0].function.arguments == '{"path": "a.py"}'
    assert one.choices[0].finish_reason == "tool_calls"


def test_tool_choice_required_is_an_error_when_the_model_does_not_call(oai):
    with pytest.raises(openai.APIStatusError) as refused:
        oai.chat.completions.create(model="echo", tools=READ_FILE, tool_choice="required",
                                    messages=[{"role": "user", "content": "just text"}])
    assert refused.value.status_code == 502 and "answered without one" in refused.value.message
    called = oai.chat.completions.create(model="echo", tools=READ_FILE, tool_choice="required",
                                         messages=[{"role": "user", "content": TWO_CALLS}])
    assert called.choices[0].finish_reason == "tool_calls"


@pytest.mark.slow
def test_tool_choice_required_is_guaranteed_for_a_llama_cpp_model(oai):
    for seed in (1, 2, 3):
        reply = oai.chat.completions.create(model="smollm2:135m", tools=READ_FILE, tool_choice="required",
                                            parallel_tool_calls=False, seed=seed, max_tokens=64,
                                            messages=[{"role": "user", "content": "Hello! How are you?"}])
        calls = reply.choices[0].message.tool_calls
        assert reply.choices[0].finish_reason == "tool_calls" and len(calls) == 1
        assert calls[0].function.name == "read_file"


def test_copilots_empty_bearer_on_the_open_stack_still_works(base_url):
    status, _, _ = post_raw(base_url, "/v1/chat/completions", {"model": "echo", "messages": [
        {"role": "user", "content": "hi"}]}, {"Authorization": "Bearer "})
    assert status == 200
