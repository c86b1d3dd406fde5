"""The official openai client against Switchboard's /v1 routes."""
from __future__ import annotations

import openai
import pytest


@pytest.fixture
def client(base_url):
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0)


def test_models(client):
    assert [m.id for m in client.models.list()] == [
        "smollm2:135m", "smollm2:135m-embed", "echo", "echo:embed", "echo:slow", "echo:coder", "echo:tools"]
    assert client.models.retrieve("echo").id == "echo"


def test_non_streamed_completion(client):
    reply = client.chat.completions.create(model="echo", messages=[{"role": "user", "content": "hi there"}])
    assert reply.choices[0].message.content == "hi there"
    assert reply.choices[0].finish_reason == "stop"
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens, reply.usage.total_tokens) == (2, 2, 4)


def test_streamed_completion_with_usage(client):
    chunks = list(client.chat.completions.create(
        model="echo", messages=[{"role": "user", "content": "one two three"}], stream=True,
        stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "one two three"
    assert chunks[-2].choices[0].finish_reason == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens == 6


def test_stream_helper_assembles_the_message(client):
    # (the helper itself refuses a reply that finished for "length")
    with client.chat.completions.stream(model="echo", messages=[{"role": "user", "content": "x y"}]) as stream:
        final = stream.get_final_completion()
    assert final.choices[0].message.content == "x y"
    assert final.choices[0].finish_reason == "stop"


@pytest.mark.parametrize("second, answer", [(" part two", "part one part two"), ("part two", "part one\npart two")],
                         ids=["continues", "new-line"])
def test_a_message_of_parts_is_one_turn(client, second, answer):
    """A message of two text parts is one message of the job (dialects/parts.py):
    echo answers the whole turn."""
    reply = client.chat.completions.create(model="echo", messages=[
        {"role": "user", "content": [{"type": "text", "text": "part one"}, {"type": "text", "text": second}]}])
    assert reply.choices[0].message.content == answer


def test_errors_are_openai_shaped(client):
    with pytest.raises(openai.NotFoundError) as missing:
        client.chat.completions.create(model="nope", messages=[{"role": "user", "content": "x"}])
    assert missing.value.body["message"] == 'model "nope" not found, try pulling it first'
    with pytest.raises(openai.BadRequestError) as bad:
        client.chat.completions.create(model="echo", messages=[{"role": "user", "content": "x"}], temperature=5)
    assert bad.value.body["param"] == "temperature"
