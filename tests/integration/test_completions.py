"""Code completion and the remaining endpoints, through the real stack:
FIM, raw mode, templates, load, format, keep_alive, /v1/completions, the
simple chat API, the priority queue and superseding."""
from __future__ import annotations

import json

import ollama
import openai
import pytest

from jobqueue.records import job_state
from protocol.keys import job_of_channel
from scripts.processes import WORKER_SLOTS
from tests.integration.events_tap import EventsTap
from tests.integration.http import DroppableStream, post_raw
from tests.integration.waits import queued, wait_until, waiting

QWEN_FIM = "<|fim_prefix|>def add(a, b):\n    <|fim_suffix|>\n\nprint(add(1, 2))<|fim_middle|>"


@pytest.fixture
def client(base_url):
    return ollama.Client(host=base_url)


def test_continue_style_fim_request_gets_the_family_prompt(base_url):
    # as Continue sends autocomplete: prompt, suffix, options, keep_alive, no "stream" (so it streams)
    status, headers, body = post_raw(base_url, "/api/generate", {
        "model": "echo:coder", "prompt": "def add(a, b):\n    ", "suffix": "\n\nprint(add(1, 2))",
        "options": {"temperature": 0.01, "num_predict": 256}, "keep_alive": "30m"})
    assert status == 200 and headers["Content-Type"] == "application/x-ndjson"
    lines = [json.loads(line) for line in body.splitlines()]
    assert "".join(line["response"] for line in lines) == QWEN_FIM
    assert lines[-1]["done"] is True and lines[-1]["done_reason"] == "stop"


def test_show_advertises_fim(client):
    show = client.show("echo:coder")
    assert "{{ .Suffix }}" in show.template and "insert" in show.capabilities
    assert "insert" not in client.show("echo").capabilities


def test_raw_prompt_is_sent_byte_for_byte(client):
    prompt = "<|im_start|>user\n  odd   spacing\t<|im_end|>\n"
    assert client.generate("echo", prompt=prompt, raw=True, stream=False).response == prompt


def test_request_template_override(client):
    reply = client.generate("echo", prompt="hi", system="be brief", template="[{{ .System }}] Q: {{ .Prompt }} A:")
    assert reply.response == "[be brief] Q: hi A:"


def test_an_empty_request_just_loads_the_model(client):
    reply = client.generate("smollm2:135m", prompt="")
    assert reply.done and reply.done_reason == "load" and reply.response == ""
    assert "smollm2:135m" in [m.model for m in client.ps().models]
    # with keep_alive 0 it unloads instead, and says so (Ollama's answer)
    reply = client.generate("smollm2:135m", prompt="", keep_alive=0)
    assert reply.done and reply.done_reason == "unload" and reply.response == ""
    assert "smollm2:135m" not in [m.model for m in client.ps().models]
    chat = client.chat("echo", messages=[])
    assert chat.done and chat.done_reason == "load" and chat.message.role == "assistant"


@pytest.mark.slow
def test_format_schema_constrains_the_real_model(client):
    schema = {"type": "object", "properties": {"color": {"type": "string", "enum": ["red", "green", "blue"]},
                                               "count": {"type": "integer"}}, "required": ["color", "count"]}
    for seed in (1, 2, 3):
        reply = client.generate("smollm2:135m", prompt="Pick a color and a count.", format=schema,
                                options={"seed": seed, "num_predict": 64})
        value = json.loads(reply.response)
        assert set(value) == {"color", "count"} and value["color"] in ("red", "green", "blue")
        assert isinstance(value["count"], int)


@pytest.mark.slow
def test_json_mode_and_response_format_on_the_real_model(base_url, client):
    # (a reply cut by the token limit cannot be whole JSON: leave it room). At
    # Ollama's default temperature (0.8) this 135M model's JSON may ramble past
    # any limit, and whether a seed does depends on the CPU's float kernels:
    # greedy decoding keeps the test about the grammar, not the dice.
    for seed in (4, 5, 6):
        reply = client.chat("smollm2:135m", format="json", options={"seed": seed, "num_predict": 200,
                                                                    "temperature": 0}, messages=[
            {"role": "user", "content": "Describe a cat as a JSON object with a name and an age."}])
        assert reply.done_reason == "stop" and isinstance(json.loads(reply.message.content), dict)
    oai = openai.OpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0)
    reply = oai.chat.completions.create(model="smollm2:135m", seed=5, max_tokens=64, messages=[
        {"role": "user", "content": "Is the sky blue?"}], response_format={"type": "json_schema", "json_schema": {
            "name": "answer", "schema": {"type": "object", "properties": {"yes": {"type": "boolean"}},
                                         "required": ["yes"]}}})
    assert isinstance(json.loads(reply.choices[0].message.content)["yes"], bool)


@pytest.mark.slow
def test_keep_alive_zero_unloads_the_model(client):
    client.generate("smollm2:135m", prompt="Hi", options={"num_predict": 2}, keep_alive=0)
    assert "smollm2:135m" not in [m.model for m in client.ps().models]
    again = client.generate("smollm2:135m", prompt="Hi", options={"num_predict": 2}, keep_alive="5m")
    assert again.load_duration > 0  # it really was unloaded, so it loaded again
    kept = client.generate("smollm2:135m", prompt="Hi", options={"num_predict": 2})
    assert kept.load_duration == 0 and "smollm2:135m" in [m.model for m in client.ps().models]


# --- /v1/completions -----------------------------------------------------------

def test_v1_completions(base_url):
    oai = openai.OpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0)
    reply = oai.completions.create(model="echo", prompt="one two three", max_tokens=2)
    assert reply.object == "text_completion" and reply.choices[0].text == "one two"
    assert reply.choices[0].finish_reason == "length" and reply.usage.completion_tokens == 2
    fim = oai.completions.create(model="echo:coder", prompt="def add(a, b):\n    ", suffix="\n\nprint(add(1, 2))",
                                 max_tokens=100)
    assert fim.choices[0].text == QWEN_FIM
    chunks = list(oai.completions.create(model="echo", prompt="a b", stream=True, stream_options={"include_usage": True}))
    assert "".join(c.choices[0].text for c in chunks if c.choices) == "a b"
    assert chunks[-2].choices[0].finish_reason == "stop" and chunks[-1].usage.total_tokens == 4
    with pytest.raises(openai.BadRequestError):
        oai.completions.create(model="echo", prompt="x", echo=True)
    with pytest.raises(openai.BadRequestError) as error:
        oai.completions.create(model="echo", prompt="x", suffix="y")
    assert error.value.body["message"] == 'suffix: "echo" does not support insert'


def test_v1_completions_sse_bytes(base_url):
    # echo:slow: one chunk per token (the instant echo's tokens may arrive merged)
    _, _, body = post_raw(base_url, "/v1/completions", {"model": "echo:slow", "prompt": "Hi there", "stream": True})
    frames = body.split(b"\n\n")
    assert frames[-2:] == [b"data: [DONE]", b""]
    chunks = [json.loads(f.removeprefix(b"data: ")) for f in frames[:-2]]
    assert [c["choices"][0]["text"] for c in chunks] == ["Hi", " there", ""]
    assert [c["choices"][0]["finish_reason"] for c in chunks] == [None, None, "stop"]
    assert all(c["object"] == "text_completion" and c["id"].startswith("cmpl-") for c in chunks)


# --- the simple chat API -----------------------------------------------------------

SIMPLE = {"model": "echo", "messages": [{"role": "user", "content": "Hello world"}]}
SIMPLE_PACED = SIMPLE | {"model": "echo:slow"}  # one line per token, for the byte-exact streams


def test_simple_chat_one_object(base_url):
    status, _, body = post_raw(base_url, "/chat/completions", SIMPLE, {"Authorization": "Bearer "})
    reply = json.loads(body)
    assert status == 200 and list(reply) == ["id", "model", "created", "message", "done"]
    assert reply["message"] == {"role": "assistant", "content": "Hello world"} and reply["done"] is True


def test_simple_chat_ndjson_bytes(base_url):
    status, headers, body = post_raw(base_url, "/chat/completions", SIMPLE_PACED | {"stream": True})
    assert status == 200 and headers["Content-Type"] == "application/x-ndjson"
    assert body == (b'{"message":{"role":"assistant","content":"Hello"},"done":false,"index":0}\n'
                    b'{"message":{"role":"assistant","content":" world"},"done":false,"index":1}\n'
                    b'{"message":{"role":"assistant","content":""},"done":true,"index":2}\n')


def test_simple_chat_sse_bytes(base_url):
    status, headers, body = post_raw(base_url, "/chat/sse", SIMPLE_PACED)
    assert status == 200 and headers["Content-Type"].startswith("text/event-stream")
    assert body == (b'data: {"message":{"role":"assistant","content":"Hello"},"done":false,"index":0}\n\n'
                    b'data: {"message":{"role":"assistant","content":" world"},"done":false,"index":1}\n\n'
                    b'data: {"message":{"role":"assistant","content":""},"done":true,"index":2}\n\n'
                    b"data: [END]\n\n")


def test_simple_chat_errors(base_url):
    status, _, body = post_raw(base_url, "/chat/completions", SIMPLE | {"model": "gone"})
    assert status == 404 and json.loads(body) == {"error": {
        "message": 'model "gone" not found, try pulling it first', "type": "not_found_error", "code": 404}}
    status, _, body = post_raw(base_url, "/chat/sse", {"model": "echo", "messages": "nope"})
    assert status == 400
    assert body.startswith(b'event: error\ndata: {"message":"messages: ') and body.endswith(
        b'"type":"invalid_request_error","code":400}\n\ndata: [END]\n\n')


# --- latency: priority queue and superseding ----------------------------------------

LONG = " ".join(f"w{i}" for i in range(300))


def test_completions_overtake_queued_chat(base_url, redis_client, redis_url):
    tap = EventsTap(redis_url)
    blockers = [DroppableStream(base_url, "/api/chat", {"model": "echo:slow", "messages": [
        {"role": "user", "content": LONG}]}) for _ in range(WORKER_SLOTS)]  # all the worker's slots
    try:
        for blocker in blockers:
            assert blocker.read_line()
        before = waiting(redis_client, "local"), waiting(redis_client, "local-completion")
        chat = DroppableStream(base_url, "/api/chat", {"model": "echo", "stream": False, "messages": [
            {"role": "user", "content": "chatjob"}]})
        wait_until(queued(redis_client, "local", before[0] + 1), what="the chat job to be queued")
        completion = DroppableStream(base_url, "/api/generate", {"model": "echo", "prompt": "fimjob", "raw": True,
                                                                 "stream": False})
        wait_until(queued(redis_client, "local-completion", before[1] + 1), what="the completion to be queued")
        assert waiting(redis_client, "local") == before[0] + 1  # the chat job still waits: no slot was free
        blockers[0].drop()  # one slot frees up: the completion, queued later, goes first
        assert b"fimjob" in completion.read_line() and b"chatjob" in chat.read_line()

        def started_at(text: bytes) -> float:
            channel = tap.wait_for_channel(text)
            return float(job_state(redis_client, job_of_channel(channel))["started_at"])
        assert started_at(b"fimjob") < started_at(b"chatjob")
    finally:
        for blocker in blockers:
            blocker.drop()
        tap.close()
