"""Embeddings through the clients that failed before: the `ollama` client
(embed, embeddings), the `openai` client (floats and base64), LangChain's
OllamaEmbeddings and OpenAIEmbeddings, LiteLLM, `llm embed` with
llm-ollama; on echo (hashed bag of words) and on the default llama.cpp
model. Upstream pass-through is in test_upstream.py."""
from __future__ import annotations

import base64
import json
import math
import os
import struct
import subprocess
import sys
from pathlib import Path

import httpx
import ollama
import openai
import pytest
from langchain_ollama import OllamaEmbeddings
from langchain_openai import OpenAIEmbeddings

from scripts.processes import ROOT
from tests.integration.http import post_raw
from workers.backends.echo import hashed_words


def norm(vector) -> float:
    return math.sqrt(sum(x * x for x in vector))


def cosine(a, b) -> float:
    return sum(x * y for x, y in zip(a, b)) / (norm(a) * norm(b))


@pytest.fixture
def client(base_url):
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0)


def test_ollama_embed_is_normalised_and_deterministic(base_url):
    reply = ollama.Client(host=base_url).embed(model="echo", input=["the cat sat", "the cat sat", "a dog ran"])
    first, again, other = reply.embeddings
    assert len(first) == 256 and first == again and first != other
    assert all(abs(norm(v) - 1) < 1e-9 for v in reply.embeddings)
    expected = hashed_words("the cat sat", 256)
    assert first == [x / norm(expected) for x in expected]
    assert reply.model == "echo" and reply.prompt_eval_count == 9 and reply.total_duration > 0


def test_ollama_embed_dimensions_and_a_single_string(base_url):
    text = "the quick brown fox jumps over the lazy dog " * 4
    reply = ollama.Client(host=base_url).embed(model="echo", input=text, dimensions=64)
    [vector] = reply.embeddings
    first = hashed_words(text, 256)[:64]
    assert norm(first) > 0 and vector == [x / norm(first) for x in first]


def test_ollama_legacy_embeddings_are_raw(base_url):
    reply = ollama.Client(host=base_url).embeddings(model="echo", prompt="the cat sat")
    assert list(reply.embedding) == hashed_words("the cat sat", 256)


def test_openai_embeddings_floats_and_base64(client):
    floats = client.embeddings.create(model="echo", input=["one two", "three"], encoding_format="float")
    assert [d.index for d in floats.data] == [0, 1] and floats.usage.prompt_tokens == 3
    assert all(abs(norm(d.embedding) - 1) < 1e-9 for d in floats.data)
    packed = client.embeddings.create(model="echo", input=["one two", "three"])  # the SDK asks for base64
    assert [len(d.embedding) for d in packed.data] == [256, 256]
    assert all(abs(a - b) < 1e-6 for a, b in zip(packed.data[0].embedding, floats.data[0].embedding))


def test_base64_is_little_endian_float32(base_url):
    status, _, raw = post_raw(base_url, "/v1/embeddings", {"model": "echo", "input": "x", "encoding_format": "base64"})
    data = httpx.Response(200, content=raw).json()["data"][0]["embedding"]
    values = struct.unpack("<256f", base64.b64decode(data))
    assert status == 200 and abs(norm(values) - 1) < 1e-6


def test_langchain_ollama_and_openai_embeddings(base_url):
    by_ollama = OllamaEmbeddings(model="echo", base_url=base_url)
    by_openai = OpenAIEmbeddings(model="echo", base_url=f"{base_url}/v1", api_key="unused",
                                 check_embedding_ctx_length=False)  # else it sends tiktoken ids
    for embeddings in (by_ollama, by_openai):
        documents = embeddings.embed_documents(["red apples", "green apples"])
        query = embeddings.embed_query("red apples")
        assert len(documents) == 2 and len(query) == 256
        assert cosine(query, documents[0]) > 0.999 and cosine(query, documents[1]) < 0.999


def test_the_local_model_embeds(base_url, client):
    reply = ollama.Client(host=base_url).embed(model="smollm2:135m", input=["def add(a, b):", "def add(a, b):"])
    first, again = reply.embeddings
    assert len(first) == 576 and abs(norm(first) - 1) < 1e-6
    assert cosine(first, again) > 0.9999  # the same input, the same vector
    similar = client.embeddings.create(model="smollm2:135m", input=["def add(a, b):", "def sum(x, y):",
                                                                  "The weather is nice today."],
                                       encoding_format="float").data
    assert cosine(similar[0].embedding, similar[1].embedding) > cosine(similar[0].embedding, similar[2].embedding)


def test_truncate(base_url):
    long_text = "word " * 3000  # the default model embeds in a 2048-token context
    refused = httpx.post(f"{base_url}/api/embed", timeout=120,
                         json={"model": "smollm2:135m", "input": long_text, "truncate": False})
    assert refused.status_code == 400
    assert refused.json()["error"].startswith("input 0 is 300")  # tokens counted by the model's tokenizer
    assert "more than the 2048-token context it is embedded in (send truncate: true to cut it)" in refused.json()["error"]
    cut = httpx.post(f"{base_url}/api/embed", timeout=120, json={"model": "smollm2:135m", "input": long_text})
    assert cut.status_code == 200 and cut.json()["prompt_eval_count"] == 2048


@pytest.mark.parametrize("path, body, message", [
    ("/api/embed", {"model": "echo:slow", "input": "x"}, '"echo:slow" does not support embeddings'),
    ("/v1/embeddings", {"model": "echo:slow", "input": "x"}, '"echo:slow" does not support embeddings'),
    ("/api/embed", {"model": "echo", "input": []}, "input: give at least one text to embed"),
    ("/api/embed", {"model": "echo", "input": "x", "dimensions": 999}, "dimensions: 999 is more than the model's 256"),
    ("/v1/embeddings", {"model": "echo", "input": 5}, "input"),
    ("/api/embed", {"model": "nope", "input": "x"}, 'model "nope" not found'),
], ids=["ollama-not-offered", "openai-not-offered", "empty", "dimensions", "bad-input", "unknown"])
def test_bad_embedding_requests(base_url, path, body, message):
    reply = httpx.post(base_url + path, json=body, timeout=30)
    assert reply.status_code == (404 if body["model"] == "nope" else 400)
    error = reply.json()["error"]
    assert message in (error if isinstance(error, str) else error["message"])


# --- the other clients of the issue, each in its own environment --------------------------
def test_litellm_embeds_through_both_dialects(base_url):
    """LiteLLM lives in a virtualenv of its own (make install-dev)."""
    script = ("import json, sys, litellm\n"
              "a = litellm.embedding(model='ollama/echo', api_base=sys.argv[1], input=['red apples', 'pears'])\n"
              "b = litellm.embedding(model='openai/echo', api_base=sys.argv[1] + '/v1', api_key='x', input=['red apples'])\n"
              "print(json.dumps([a.data[0]['embedding'], b.data[0]['embedding'], len(a.data)]))\n")
    python = ROOT / ".venv-litellm" / "bin" / "python"
    out = subprocess.run([str(python), "-c", script, base_url], capture_output=True, text=True, timeout=120)
    by_ollama, by_openai, count = json.loads(out.stdout.strip().splitlines()[-1])
    assert count == 2 and len(by_ollama) == 256 and cosine(by_ollama, by_openai) > 0.999999


def test_llm_embed_with_llm_ollama_finds_the_embedding_models(base_url, tmp_path):
    """simonw/llm with the llm-ollama plugin offers the models whose
    capabilities say "embedding" (registry embeddings = "only")."""
    env = dict(os.environ, OLLAMA_HOST=base_url, LLM_USER_PATH=str(tmp_path))
    llm = str(Path(sys.executable).parent / "llm")
    models = subprocess.run([llm, "embed-models"], env=env, capture_output=True, text=True, timeout=120).stdout
    assert "ollama/echo:embed" in models and "ollama/smollm2:135m-embed" in models
    assert "ollama/echo:slow" not in models
    out = subprocess.run([llm, "embed", "-m", "ollama/echo:embed", "-c", "red apples"], env=env,
                         capture_output=True, text=True, timeout=120)
    vector = json.loads(out.stdout)
    expected = hashed_words("red apples", 256)
    assert max(abs(a - b / norm(expected)) for a, b in zip(vector, expected)) < 1e-6
