"""Upstream backends through the whole path: a real third-party OpenAI server
(llama-cpp-python's), a real Ollama-protocol server (a second Switchboard),
and recorded odd upstream streams replayed byte for byte."""
from __future__ import annotations

import base64
import json
import math
import re
import time

import httpx
import ollama
import openai
import pytest

from tests.integration.events_tap import EventsTap
from tests.integration.http import DroppableStream, post_raw
from tests.integration.sse_rules import assert_well_formed, parse_sse
from tests.integration.copilot_client import what_copilot_shows
from tests.integration.upstream_stack import LLAMA_KEY
from workers.backends.echo import hashed_words

TOOLS = [{"type": "function", "function": {"name": "read_file", "parameters": {
    "type": "object", "properties": {"filePath": {"type": "string"}, "line": {"type": "integer"}}}}},
    {"type": "function", "function": {"name": "grep", "parameters": {"type": "object"}}}]


@pytest.fixture
def base(upstreams, clean_redis):
    return upstreams["base"]


@pytest.fixture
def client(base):
    return openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0)


# What llama-cpp-python's server prints when a streaming client goes away mid-reply.
LLAMA_DISCONNECTED = "Disconnected from client (via refresh/close)"


def user(text):
    return [{"role": "user", "content": text}]


# --- a real third-party OpenAI-compatible server --------------------------------

def test_llama_server_chat_and_usage(client, upstreams):
    """llama-cpp-python's server sends no usage in streams (it ignores
    stream_options): completion tokens are counted from its one-token
    chunks and must equal its own count; the prompt count is not invented."""
    request = {"messages": user("Say hi"), "max_tokens": 8, "temperature": 0, "seed": 1}
    reply = client.chat.completions.create(model="up-llama", **request)
    direct = httpx.post(f"{upstreams['llama']}/v1/chat/completions", headers={"Authorization": f"Bearer {LLAMA_KEY}"},
                        json=request, timeout=60).json()
    assert reply.choices[0].message.content == direct["choices"][0]["message"]["content"]
    assert reply.choices[0].finish_reason == direct["choices"][0]["finish_reason"]
    assert reply.usage.completion_tokens == direct["usage"]["completion_tokens"]
    assert reply.usage.prompt_tokens == 0


def test_llama_server_streams_through_both_dialects(base, client):
    chunks = list(client.chat.completions.create(model="up-llama", messages=user("Count to three"), max_tokens=12,
                                                 stream=True, stream_options={"include_usage": True}))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert chunks[-1].usage.completion_tokens > 0
    parts = list(ollama.Client(host=base).chat("up-llama", messages=user("Hi"), stream=True,
                                               options={"num_predict": 6}))
    assert parts[-1].done and 0 < parts[-1].eval_count <= 6


def test_wrong_key_is_502_naming_the_upstream_never_the_key(base, upstreams):
    status, _, body = post_raw(base, "/v1/chat/completions", {"model": "up-llama-badkey", "messages": user("x")})
    message = json.loads(body)["error"]["message"]
    host = upstreams["llama"].removeprefix("http://")
    assert status == 502 and message == f"upstream {host} refused the credentials configured for it (HTTP 401)"
    assert b"not-the-key" not in body and LLAMA_KEY.encode() not in body


def test_server_down_is_502_naming_it(base):
    status, _, body = post_raw(base, "/api/chat", {"model": "up-down", "messages": user("x")})
    assert status == 502 and json.loads(body)["error"].startswith("cannot reach upstream 127.0.0.1:")


def test_dropping_the_client_closes_the_upstream_request(base, upstreams):
    def direct_request_seconds() -> float:
        started = time.monotonic()
        direct = httpx.post(f"{upstreams['llama']}/v1/chat/completions", timeout=60, json={
            "messages": user("hi"), "max_tokens": 2}, headers={"Authorization": f"Bearer {LLAMA_KEY}"})
        assert direct.status_code == 200
        return time.monotonic() - started

    llama_log = upstreams["llama_process"].output
    disconnects = llama_log().count(LLAMA_DISCONNECTED)
    alone = direct_request_seconds()  # what a short request takes on this machine now (slower when it is busy)
    stream = DroppableStream(base, "/v1/chat/completions", {
        "model": "up-llama", "stream": True, "max_tokens": 1500, "temperature": 1.0,
        "messages": user("Write a very long story about a lighthouse.")})
    for _ in range(4):
        assert stream.read_line()
    stream.drop()
    # The llama server serves one request at a time: had the upstream request
    # stayed open it would still be generating ~1500 tokens (~25 s), and the
    # next request would wait for it.
    after = direct_request_seconds()
    # A busy machine's pace changes within seconds: the short request is timed
    # again after, and the slower of the two is what it takes now.
    alone = max(alone, direct_request_seconds())
    # The server says it saw the stream closed under it (a finished one says nothing).
    assert llama_log().count(LLAMA_DISCONNECTED) > disconnects
    assert after < alone + 3, f"the next request took {after:.2f} s, a short one {alone:.2f} s"


# --- a real Ollama-protocol server: a second Switchboard -------------------------

def test_ollama_upstream_chat_with_options(base):
    client = ollama.Client(host=base)
    assert client.chat("up-ollama", messages=user("one two three")).message.content == "one two three"
    reply = client.chat("up-ollama", messages=user("a b c d"), options={"num_predict": 2})
    assert reply.message.content == "a b" and reply.done_reason == "length" and reply.eval_count == 2


def test_native_tools_through_an_ollama_upstream_round_trip(client):
    # the upstream Switchboard emulates tools on echo and answers Ollama-style
    # tool calls (object arguments, no ids); we re-emit them for OpenAI clients
    text = '<invoke name="read_file"><parameter name="filePath">/a</parameter><parameter name="line">3</parameter></invoke>'
    with client.chat.completions.stream(model="up-ollama", messages=user(text), tools=TOOLS) as stream:
        final = stream.get_final_completion()
    call = final.choices[0].message.tool_calls[0]
    assert final.choices[0].finish_reason == "tool_calls"
    assert (call.function.name, json.loads(call.function.arguments)) == ("read_file", {"filePath": "/a", "line": 3})
    messages = user(text) + [{"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
                             {"role": "tool", "tool_call_id": call.id, "content": "file text"}]
    answer = client.chat.completions.create(model="up-ollama", messages=messages, tools=TOOLS)
    assert answer.choices[0].message.content == "file text"


def test_native_tools_through_an_openai_upstream(client):
    text = '<invoke name="grep"><parameter name="q">x</parameter></invoke>'
    reply = client.chat.completions.create(model="up-sb", messages=user(text), tools=TOOLS)
    assert reply.choices[0].message.tool_calls[0].function.name == "grep"


@pytest.mark.parametrize("model", ["up-ollama", "up-sb"], ids=["ollama-generate", "openai-completions"])
def test_raw_prompts_use_the_upstreams_completion_endpoints(base, model):
    # the upstream Switchboard's echo answers with the raw prompt it was given
    prompt = "<|fim_prefix|>x = <|fim_suffix|>\n<|fim_middle|>"
    reply = ollama.Client(host=base).generate(model, prompt=prompt, raw=True)
    assert reply.response == prompt


def test_upstream_404_is_our_404(client):
    with pytest.raises(openai.NotFoundError) as error:
        client.chat.completions.create(model="up-sb-missing", messages=user("x"))
    assert error.value.body["message"].startswith('model "up-sb-missing" was not found at upstream 127.0.0.1:')


def test_show_uses_the_registry_context_length_and_name(base):
    show = ollama.Client(host=base).show("up-sb")
    assert show.modelinfo["upstream.context_length"] == 131072
    assert show.modelinfo["general.basename"] == "Switchboard echo" and "tools" in show.capabilities


def test_abort_propagates_to_an_ollama_upstream(base, redis_url):
    tap = EventsTap(redis_url)
    try:
        stream = DroppableStream(base, "/api/chat", {"model": "up-ollama-slow",
                                                     "messages": user(" ".join(["w"] * 400))})
        for _ in range(3):
            assert stream.read_line()
        stream.drop()
        dropped = time.monotonic()
        deadline = dropped + 2
        while len(tap.aborts()) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        # ours, then the upstream Switchboard's own job, aborted when our worker hung up
        assert len(tap.aborts()) == 2 and tap.aborts()[1][0] - dropped < 1.0
    finally:
        tap.close()


# --- recorded odd shapes, replayed byte for byte ---------------------------------

@pytest.mark.parametrize("shape, content", [
    ("whole", "Looking."), ("interleaved", ""), ("no-ids", ""), ("index0", "")])
def test_upstream_tool_deltas_are_re_emitted_in_the_one_strict_shape(base, shape, content):
    status, _, body = post_raw(base, "/v1/chat/completions", {
        "model": f"shape-{shape}", "stream": True, "messages": user("x"), "tools": TOOLS})
    assert status == 200
    chunks = parse_sse(body)
    assert_well_formed(chunks, include_usage=False)
    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert "".join(d.get("content", "") for d in deltas) == content
    heads = [d["tool_calls"][0] for d in deltas if "tool_calls" in d and "id" in d["tool_calls"][0]]
    bodies = [d["tool_calls"][0] for d in deltas if "tool_calls" in d and "id" not in d["tool_calls"][0]]
    assert [h["function"]["name"] for h in heads] == ["read_file", "grep"]
    assert [json.loads(b["function"]["arguments"]) for b in bodies] == [{"filePath": "/a.ts"}, {"q": "todo"}]
    assert len({h["id"] for h in heads}) == 2


def test_sdk_assembles_upstream_calls(client):
    with client.chat.completions.stream(model="shape-interleaved", messages=user("x"), tools=TOOLS) as stream:
        final = stream.get_final_completion()
    assert [c.function.name for c in final.choices[0].message.tool_calls] == ["read_file", "grep"]


def test_text_with_comments_and_event_lines_and_upstream_usage(client):
    chunks = list(client.chat.completions.create(model="shape-text", messages=user("x"), stream=True,
                                                 stream_options={"include_usage": True}))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Hello there"
    assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens) == (11, 7)


# --- errors, retries, timeouts, injection ---------------------------------------

@pytest.mark.parametrize("model, path, status, retry_after", [
    ("status-401", "/v1/chat/completions", 502, None),
    ("status-429", "/v1/chat/completions", 503, "7"),
    ("status-503", "/api/chat", 503, "7"),
], ids=["401", "429", "503"])
def test_upstream_statuses(base, model, path, status, retry_after):
    got, headers, body = post_raw(base, path, {"model": model, "messages": user("x")})
    assert got == status and headers.get("Retry-After") == retry_after


def test_retry_before_the_first_token(client, upstreams):
    reply = client.chat.completions.create(model="flaky", messages=user("x"))
    assert reply.choices[0].message.content == "Hello there" and upstreams["scripted"].counts["flaky"] == 2


def test_a_slow_first_token_is_not_an_idle_timeout(client):
    assert client.chat.completions.create(model="slow-first", messages=user("x")).choices[0].message.content


def test_an_upstream_stalling_mid_stream_ends_with_an_in_band_error(base):
    status, _, body = post_raw(base, "/v1/chat/completions", {"model": "stall", "stream": True, "messages": user("x")})
    assert status == 200
    chunks = parse_sse(body)
    assert chunks[1]["choices"][0]["delta"]["content"] == "partial"
    # the error object, then the answer closed with finish_reason "error" (see dialects/openai_writer.py)
    assert chunks[-2]["error"]["message"].endswith("stopped sending tokens for 0.5 s (timed out)")
    assert chunks[-1]["choices"][0]["finish_reason"] == "error"
    shown = what_copilot_shows(body)
    assert shown.kind == "failed" and "stopped sending tokens for 0.5 s (timed out)" in shown.shown


def test_the_openai_sdk_raises_the_in_band_error_with_its_message(client):
    with pytest.raises(openai.APIError, match=r"stopped sending tokens for 0\.5 s \(timed out\)"):
        for _ in client.chat.completions.create(model="stall", stream=True, messages=user("x")):
            pass


def test_no_first_token_in_time_is_504(base):
    status, _, body = post_raw(base, "/api/chat", {"model": "hang-timeout", "messages": user("x")})
    assert status == 504 and "timed out" in json.loads(body)["error"]


@pytest.mark.parametrize("model", ["endless", "hang"], ids=["streaming", "waiting-for-first-token"])
def test_abort_closes_the_upstream_connection_at_once(base, upstreams, model):
    stream = DroppableStream(base, "/v1/chat/completions", {"model": model, "stream": True, "messages": user("x")})
    if model == "endless":
        assert stream.read_line()
    else:
        time.sleep(0.5)
    stream.drop()
    dropped = time.monotonic()
    deadline = dropped + 3
    while model not in upstreams["scripted"].closed_at and time.monotonic() < deadline:
        time.sleep(0.01)
    assert upstreams["scripted"].closed_at[model] - dropped < 1.0


def test_system_injection_dropped_params_and_headers_reach_the_upstream(client, upstreams):
    client.chat.completions.create(model="inject", seed=3, messages=[
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}])
    request = [r for r in upstreams["scripted"].requests if r["body"]["model"] == "record"][-1]
    body = request["body"]
    assert "stream_options" not in body and "seed" not in body and request["headers"]["X-Team"] == "office"
    assert [m["role"] for m in body["messages"]] == ["user"]
    # no tools offered, so no agent instructions: only the client's system prompt
    assert body["messages"][0]["content"] == "<system_context>\n=== System Context 1 ===\nBe brief.\n</system_context>\n\nHi"


# --- embeddings passed through, in either dialect ------------------------------------------
@pytest.mark.parametrize("model", ["up-embed", "up-embed-ollama"], ids=["openai-upstream", "ollama-upstream"])
def test_embeddings_pass_through_both_dialects(base, client, model):
    """The upstream is Switchboard's own echo: the vectors must be echo's,
    normalised, whichever dialect asked and whichever the upstream speaks."""
    raw = hashed_words("red apples", 256)
    expected = [x / math.sqrt(sum(v * v for v in raw)) for x in raw]
    by_openai = client.embeddings.create(model=model, input=["red apples", "pears"], encoding_format="float")
    assert [d.index for d in by_openai.data] == [0, 1]
    assert max(abs(a - b) for a, b in zip(by_openai.data[0].embedding, expected)) < 1e-9
    by_ollama = ollama.Client(host=base).embed(model=model, input="red apples")
    assert max(abs(a - b) for a, b in zip(by_ollama.embeddings[0], expected)) < 1e-9
    assert by_ollama.prompt_eval_count == 2


def test_an_embedding_model_is_refused_for_chat(base, client):
    with pytest.raises(openai.BadRequestError, match='"up-embed" does not support chat'):
        client.chat.completions.create(model="up-embed", messages=user("hi"))
    generate = httpx.post(f"{base}/api/generate", json={"model": "up-embed-ollama", "prompt": "hi"})
    assert generate.status_code == 400 and generate.json() == {"error": '"up-embed-ollama" does not support generate'}
    assert httpx.post(f"{base}/api/show", json={"model": "up-embed"}).json()["capabilities"] == ["embedding"]


# --- images: inline only, translated between dialects ------------------------------------
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(64)).decode()


def last_request(upstreams, path_start: str) -> dict:
    return [r for r in upstreams["scripted"].requests if r["path"].startswith(path_start)][-1]["body"]


def test_an_openai_image_reaches_both_kinds_of_upstream(client, upstreams):
    content = [{"type": "text", "text": "What is this?"},
               {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}]
    client.chat.completions.create(model="vision", messages=[{"role": "user", "content": content}])
    assert last_request(upstreams, "/v1/chat")["messages"][-1]["content"] == content
    client.chat.completions.create(model="vision-ollama", messages=[{"role": "user", "content": content}])
    assert last_request(upstreams, "/api/chat")["messages"][-1] | {} == {
        "role": "user", "content": "What is this?", "images": [PNG]}


def test_an_ollama_image_reaches_both_kinds_of_upstream(base, upstreams):
    client = ollama.Client(host=base)
    client.chat(model="vision", messages=[{"role": "user", "content": "What is this?", "images": [PNG]}])
    assert last_request(upstreams, "/v1/chat")["messages"][-1]["content"] == [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}]  # the type read from its bytes
    client.generate(model="vision-ollama", prompt="And this?", images=[PNG])
    assert last_request(upstreams, "/api/chat")["messages"][-1]["images"] == [PNG]
    shown = httpx.post(f"{base}/api/show", json={"model": "vision"}).json()["capabilities"]
    assert "vision" in shown


@pytest.mark.parametrize("model, url, message", [
    ("vision", "https://example.org/cat.png", "remote image URLs are not fetched by this server"),
    ("vision", "data:image/png;base64,@@@", "not valid base64 image data"),
    ("vision", "data:image/png;base64," + base64.b64encode(bytes(21 * 1024 * 1024)).decode(),
     "the image is 22020096 bytes; at most 20971520 bytes (20 MiB) per image are accepted"),
    ("up-sb", f"data:image/png;base64,{PNG}", "this model does not support images"),
], ids=["remote-url", "bad-base64", "too-big", "no-vision"])
def test_images_refused_with_the_reason(client, model, url, message):
    content = [{"type": "text", "text": "x"}, {"type": "image_url", "image_url": {"url": url}}]
    with pytest.raises(openai.BadRequestError, match=re.escape(message)):
        client.chat.completions.create(model=model, messages=[{"role": "user", "content": content}])


# --- thinking, both ways -------------------------------------------------------------------
@pytest.mark.parametrize("model", ["reasoner", "reasoner-ollama"], ids=["openai-upstream", "ollama-upstream"])
def test_thinking_reaches_an_ollama_client(base, model):
    lines = list(ollama.Client(host=base).chat(model=model, messages=user("1+1?"), think=True, stream=True))
    assert "".join(line.message.thinking or "" for line in lines) == "Let me see. Two."
    assert "".join(line.message.content for line in lines) == "It is 2."
    whole = ollama.Client(host=base).chat(model=model, messages=user("1+1?"), think=True)
    assert whole.message.thinking == "Let me see. Two." and whole.message.content == "It is 2."


@pytest.mark.parametrize("model", ["reasoner", "reasoner-ollama"], ids=["openai-upstream", "ollama-upstream"])
def test_thinking_on_generate(base, model):
    lines = list(ollama.Client(host=base).generate(model=model, prompt="1+1?", think=True, stream=True))
    assert "".join(line.thinking or "" for line in lines) == "Let me see. Two."
    assert "".join(line.response for line in lines) == "It is 2."


@pytest.mark.parametrize("model", ["reasoner", "reasoner-ollama"], ids=["openai-upstream", "ollama-upstream"])
def test_thinking_reaches_an_openai_client(client, model):
    chunks = list(client.chat.completions.create(model=model, messages=user("1+1?"), stream=True))
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    assert "".join((d.model_extra or {}).get("reasoning_content") or "" for d in deltas) == "Let me see. Two."
    assert "".join(d.content or "" for d in deltas) == "It is 2."
    whole = client.chat.completions.create(model=model, messages=user("1+1?"))
    assert whole.choices[0].message.model_extra["reasoning_content"] == "Let me see. Two."


@pytest.mark.parametrize("model, reasoning", [("reasoner", 2), ("reasoner-ollama", 4), ("think-tags", 3)],
                         ids=["upstreams-count", "estimated", "echo-words"])
def test_thinking_is_counted_as_reasoning_tokens(client, model, reasoning):
    """The upstream's own count where it gives one; else the thinking's text
    by the backend's count ("Let me see. Two.": 16 characters, at 4 a token;
    echo's tokens are words: "First, read it.")."""
    text = "<think>First, read it.</think>The answer." if model == "think-tags" else "1+1?"
    response = client.responses.create(model=model, input=text)
    assert response.usage.output_tokens_details.reasoning_tokens == reasoning
    assert response.output[0].type == "reasoning"
    chat = client.chat.completions.create(model=model, messages=user(text))
    assert chat.usage.completion_tokens_details.reasoning_tokens == reasoning


def test_think_levels_and_false_go_upstream(base, client, upstreams):
    client.chat.completions.create(model="reasoner", messages=user("x"), reasoning_effort="low")
    assert last_request(upstreams, "/v1/chat")["reasoning_effort"] == "low"
    reply = ollama.Client(host=base).chat(model="reasoner-ollama", messages=user("x"), think=False)
    assert last_request(upstreams, "/api/chat")["think"] is False
    assert not reply.message.thinking and reply.message.content == "It is 2."  # what an upstream still sent is dropped


def test_a_local_models_think_tags_are_split_out(base, client):
    text = "<think>First, read it.</think>The answer."
    lines = list(ollama.Client(host=base).chat(model="think-tags", messages=user(text), stream=True))
    assert "".join(line.message.thinking or "" for line in lines) == "First, read it."
    assert "".join(line.message.content for line in lines) == "The answer."
    whole = client.chat.completions.create(model="think-tags", messages=user(text))
    assert whole.choices[0].message.content == "The answer."
    assert whole.choices[0].message.model_extra["reasoning_content"] == "First, read it."
    assert "thinking" in httpx.post(f"{base}/api/show", json={"model": "think-tags"}).json()["capabilities"]


def test_a_model_without_thinking_asked_to_think_gets_ollamas_400(base):
    reply = httpx.post(f"{base}/api/chat", json={"model": "up-sb", "messages": user("x"), "think": True})
    assert reply.status_code == 400 and reply.json() == {"error": '"up-sb" does not support thinking'}
