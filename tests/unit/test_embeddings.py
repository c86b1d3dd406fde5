"""Embedding translations and vector shapes, without a server."""
from __future__ import annotations

import base64
import struct

import pytest

from catalog.registry import parse_entry
from dialects.embeddings import (
    base64_floats, normalized, ollama_embed_to_job, ollama_upstream_request, openai_embeddings_to_job,
    openai_upstream_vectors, shortened,
)
from dialects.ollama_schemas import EmbedRequest
from dialects.openai_schemas import EmbeddingsRequest
from protocol.contract import EMBED_VERSION, EmbedSpec
from protocol.errors import InvalidRequest


def test_vectors():
    assert normalized([3.0, 4.0]) == [0.6, 0.8] and normalized([0.0, 0.0]) == [0.0, 0.0]
    assert shortened([3.0, 4.0, 12.0], 2) == [0.6, 0.8]
    with pytest.raises(InvalidRequest, match="dimensions: 4 is more than the model's 3"):
        shortened([1.0, 2.0, 3.0], 4)
    assert struct.unpack("<2f", base64.b64decode(base64_floats([0.5, -1.0]))) == (0.5, -1.0)


@pytest.mark.parametrize("value, inputs, tokens", [
    ("a", ["a"], None),
    (["a", "b"], ["a", "b"], None),
    ([1, 2, 3], [], [[1, 2, 3]]),
    ([[1, 2], [3]], [], [[1, 2], [3]]),
], ids=["text", "texts", "token-array", "token-arrays"])
def test_openai_inputs(value, inputs, tokens):
    job = openai_embeddings_to_job(EmbeddingsRequest(model="m", input=value), "j", "m")
    assert job.embed == EmbedSpec(inputs=inputs, tokens=tokens, truncate=False) and job.version == EMBED_VERSION


def test_ollama_input_and_truncate():
    job = ollama_embed_to_job(EmbedRequest(model="m", input="x", truncate=False, keep_alive="1m"), "j", "m")
    assert job.embed == EmbedSpec(inputs=["x"], truncate=False) and job.keep_alive == 60
    with pytest.raises(InvalidRequest, match="input: give at least one text"):
        ollama_embed_to_job(EmbedRequest(model="m", input=[]), "j", "m")


def test_upstream_mappings():
    assert ollama_upstream_request(EmbedSpec(inputs=["x"]), "nomic") == (
        "/api/embed", {"model": "nomic", "input": ["x"], "truncate": True})
    with pytest.raises(InvalidRequest, match="token arrays cannot be passed to an Ollama upstream"):
        ollama_upstream_request(EmbedSpec(tokens=[[1]]), "nomic")
    body = {"data": [{"index": 1, "embedding": [2.0]}, {"index": 0, "embedding": [1.0]}], "usage": {"prompt_tokens": 4}}
    assert openai_upstream_vectors(body) == ([[1.0], [2.0]], 4)


@pytest.mark.parametrize("embeddings, capabilities", [
    ("off", ["completion", "tools"]), ("also", ["completion", "tools"]), ("only", ["embedding"]),
])
def test_registry_embeddings(embeddings, capabilities):
    assert parse_entry("m", {"backend": "echo", "embeddings": embeddings}).capabilities == capabilities
