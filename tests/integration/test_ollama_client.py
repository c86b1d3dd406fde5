"""The official ollama client against Switchboard, as Continue and scripts use it."""
from __future__ import annotations

from datetime import datetime

import ollama
import pytest


@pytest.fixture
def client(base_url):
    return ollama.Client(host=base_url)


def test_discovery(client):
    assert client.list().models[0].model == "smollm2:135m"
    assert all(isinstance(m.modified_at, datetime) for m in client.list().models)
    show = client.show("smollm2:135m")
    assert "completion" in show.capabilities
    assert show.modelinfo["general.architecture"] == "llama"
    assert show.modelinfo["llama.context_length"] == 8192  # read from the GGUF
    assert show.details.quantization_level == "Q4_1"


def test_show_accepts_the_older_name_field(base_url):
    import httpx

    body = httpx.post(f"{base_url}/api/show", json={"name": "echo"}).json()
    assert body["model_info"]["general.basename"] == "echo"


def test_streamed_chat_has_role_on_every_line_and_stats_on_the_last(client):
    parts = list(client.chat("echo", messages=[{"role": "user", "content": "one two three"}]
                             , stream=True))
    assert "".join(p.message.content for p in parts) == "one two three"
    assert all(p.message.role == "assistant" for p in parts)
    last = parts[-1]
    assert last.done and last.done_reason == "stop"
    assert last.eval_count == 3 and last.prompt_eval_count == 3
    assert last.total_duration >= last.eval_duration > 0


def test_non_streamed_chat_and_token_limit(client):
    reply = client.chat("echo", messages=[{"role": "user", "content": "a b c d e"}], stream=False,
                        options={"num_predict": 2})
    assert reply.message.content == "a b"
    assert reply.done_reason == "length" and reply.eval_count == 2


def test_generate_streams_the_prompt_back(client):
    parts = list(client.generate("echo", prompt="hello  there\n", stream=True))
    assert "".join(p.response for p in parts) == "hello  there\n"
    assert parts[-1].done


def test_stop_sequence(client):
    reply = client.chat("echo", messages=[{"role": "user", "content": "alpha beta STOP gamma"}],
                        options={"stop": ["STOP"]})
    assert reply.message.content == "alpha beta "


def test_unknown_model_is_404_with_ollamas_message(client):
    with pytest.raises(ollama.ResponseError) as error:
        client.chat("nope", messages=[{"role": "user", "content": "x"}])
    assert error.value.status_code == 404
    assert error.value.error == 'model "nope" not found, try pulling it first'


def test_ps_lists_a_model_after_a_worker_ran_it(client):
    client.chat("echo", messages=[{"role": "user", "content": "warm"}])
    running = client.ps().models
    assert [m.model for m in running] == ["echo"]
    assert running[0].expires_at is not None
