"""The real SmolLM2-135M through the whole path (web, queue, worker, llama.cpp).

llama-cpp-python's own create_chat_completion, run in the test process on
the same GGUF, is the reference: greedy decoding must give the same text and
the same prompt token count."""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import ollama
import openai
import pytest

from tests.integration.http import post_raw
from tests.integration.sse_rules import assert_well_formed, parse_sse
from catalog.llamacpp import smollm2_gguf

pytestmark = pytest.mark.slow
MESSAGES = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Name three colors."}]
GREEDY = {"temperature": 0, "repeat_penalty": 1.0, "seed": 7}


@pytest.fixture(scope="module")
def reference():
    from llama_cpp import Llama

    llm = Llama(model_path=str(smollm2_gguf()), n_ctx=4096, verbose=False)
    return llm.create_chat_completion(messages=MESSAGES, max_tokens=24, **GREEDY)


def test_ollama_chat_matches_llama_cpp(base_url, reference):
    reply = ollama.Client(host=base_url).chat("smollm2:135m", messages=MESSAGES,
                                              options=GREEDY | {"num_predict": 24})
    assert reply.message.content == reference["choices"][0]["message"]["content"]
    assert reply.prompt_eval_count == reference["usage"]["prompt_tokens"]
    assert reply.eval_count == reference["usage"]["completion_tokens"]
    assert reply.done_reason == reference["choices"][0]["finish_reason"]
    assert reply.load_duration >= 0 and reply.prompt_eval_duration > 0 and reply.eval_duration > 0


def test_openai_stream_matches_llama_cpp(base_url, reference):
    client = openai.OpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0)
    chunks = list(client.chat.completions.create(
        model="smollm2:135m", messages=MESSAGES, stream=True, stream_options={"include_usage": True},
        max_tokens=24, temperature=0, seed=7))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    # OpenAI requests carry no repeat_penalty, so the server's default (1.1) applies:
    # compare token accounting, which does not depend on sampling.
    assert text
    assert chunks[-1].usage.prompt_tokens == reference["usage"]["prompt_tokens"]
    assert chunks[-1].usage.completion_tokens <= 24


def test_token_limit_gives_length(base_url):
    reply = ollama.Client(host=base_url).generate("smollm2:135m", prompt="Tell me a long story.",
                                                  options={"num_predict": 5, "seed": 1})
    assert reply.done_reason == "length" and reply.eval_count == 5


def test_a_prompt_longer_than_the_context_is_a_400_before_any_byte(base_url):
    status, _, body = post_raw(base_url, "/api/chat", {
        "model": "smollm2:135m", "options": {"num_ctx": 64},
        "messages": [{"role": "user", "content": "word " * 200}]})
    assert status == 400
    assert "context window of 64" in json.loads(body)["error"]


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("turn", ["first_turn", "follow_up_turn"])
def test_copilot_agent_requests_with_tools_always_stream_well_formed(base_url, copilot_fixture, turn, seed):
    """Whatever the small model says with tools offered, the stream obeys the rules."""
    body = copilot_fixture[turn] | {"max_tokens": 96, "seed": seed, "temperature": 0.9}
    status, headers, raw = post_raw(base_url, "/v1/chat/completions", body, copilot_fixture["headers"])
    assert status == 200 and headers["Content-Type"].startswith("text/event-stream")
    chunks = parse_sse(raw)
    assert_well_formed(chunks, include_usage=True)
    usage = chunks[-1]["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"] > 0


def test_the_tool_prompt_reaches_the_model(base_url, copilot_fixture):
    """The instructions and tools count in the prompt: more tokens than without."""
    plain = copilot_fixture["first_turn"] | {"max_tokens": 1, "stream": False}
    with_tools = json.loads(post_raw(base_url, "/v1/chat/completions", plain)[2])["usage"]["prompt_tokens"]
    no_tools = json.loads(post_raw(base_url, "/v1/chat/completions", plain | {"tool_choice": "none"})[2])
    assert with_tools > no_tools["usage"]["prompt_tokens"] + 100


# 200 generations, four at a time: about 65 s on 2 idle cores (80 one by one), several times that on busy ones
@pytest.mark.timeout(900)
def test_json_schema_output_always_parses_and_validates(base_url):
    """llama-cpp-python's schema grammar let raw control characters into
    strings (4 of 40 replies failed to parse); 200 of 200 must now stop
    normally, parse, and follow the schema, at temperature 0.8. Four at a
    time, as the worker's batch takes them (a seed's reply is the same
    batched or alone: tests/unit/test_llama_engine.py)."""
    # maxLength bounds the string, so every reply can close its JSON within num_predict
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 40},
                                               "population": {"type": "integer"}},
              "required": ["city", "population"]}
    client = ollama.Client(host=base_url)

    def one(seed: int):
        return seed, client.chat("smollm2:135m", format=schema, options={"temperature": 0.8, "seed": seed,
                                                                           "num_predict": 200},
                                 messages=[{"role": "user", "content": "Name a big city and its population, as JSON."}])
    with ThreadPoolExecutor(4) as pool:
        replies = list(pool.map(one, range(200)))
    for seed, reply in replies:
        assert reply.done_reason == "stop", (seed, reply.message.content)
        value = json.loads(reply.message.content)
        assert set(value) == {"city", "population"} and isinstance(value["city"], str), (seed, value)
        assert isinstance(value["population"], int) and not isinstance(value["population"], bool), (seed, value)
