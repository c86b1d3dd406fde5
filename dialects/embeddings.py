"""Embeddings in the four dialects that ask for them: requests -> one
embedding job, and the job's vectors -> each dialect's reply.

The worker returns the model's vectors as they are; the shapes differ here:
- Ollama /api/embed: `{"model", "embeddings": [[...]], "total_duration",
  "load_duration", "prompt_eval_count"}`, vectors L2-normalised (as Ollama
  returns them), `dimensions` keeps the first N and normalises again;
- Ollama /api/embeddings (legacy): `{"embedding": [...]}`, the raw vector;
- OpenAI /v1/embeddings: `{"object": "list", "data": [{"object":
  "embedding", "index", "embedding"}], "model", "usage"}`, normalised;
  `encoding_format: "base64"` sends each vector as little-endian float32
  bytes in base64 (the openai SDK's default: it decodes them itself);
- Gemini :embedContent `{"embedding": {"values": [...]}}` and
  :batchEmbedContents `{"embeddings": [...]}`, normalised, each request's
  `outputDimensionality` keeping its first N.
"""
from __future__ import annotations

import base64
import math
import struct

from dialects.gemini_schemas import EmbedContentRequest
from dialects.ollama import keep_alive_seconds, to_sampling
from dialects.ollama_schemas import EmbeddingsRequest as OllamaLegacyRequest, EmbedRequest
from dialects.openai_schemas import EmbeddingsRequest as OpenAIRequest
from dialects.writer import Transcript, Writer
from protocol.contract import EMBED_VERSION, EmbedSpec, Job
from protocol.errors import InvalidRequest


# --- vectors ---------------------------------------------------------------------------
def normalized(vector: list[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm else list(vector)


def shortened(vector: list[float], dimensions: int | None) -> list[float]:
    """The first `dimensions` values, normalised again (Matryoshka-style)."""
    if dimensions is None:
        return normalized(vector)
    if dimensions > len(vector):
        raise InvalidRequest(f"dimensions: {dimensions} is more than the model's {len(vector)}", param="dimensions")
    return normalized(vector[:dimensions])


def base64_floats(vector: list[float]) -> str:
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()


# --- requests -> job -------------------------------------------------------------------
def _job(job_id: str, model: str, spec: EmbedSpec, **fields) -> Job:
    if not (spec.inputs or spec.tokens):
        raise InvalidRequest("input: give at least one text to embed", param="input")
    return Job(id=job_id, model=model, version=EMBED_VERSION, embed=spec, **fields)


def ollama_embed_to_job(request: EmbedRequest, job_id: str, model: str) -> Job:
    inputs = [request.input] if isinstance(request.input, str) else request.input
    return _job(job_id, model, EmbedSpec(inputs=inputs, truncate=request.truncate),
                options=to_sampling(request.options), keep_alive=keep_alive_seconds(request.keep_alive))


def ollama_embeddings_to_job(request: OllamaLegacyRequest, job_id: str, model: str) -> Job:
    return _job(job_id, model, EmbedSpec(inputs=[request.prompt]), options=to_sampling(request.options),
                keep_alive=keep_alive_seconds(request.keep_alive))


def openai_embeddings_to_job(request: OpenAIRequest, job_id: str, model: str) -> Job:
    """Token arrays are the model's own token ids (what vLLM and llama.cpp's
    servers do); a client that tokenizes with tiktoken must be told not to
    (LangChain: check_embedding_ctx_length=False)."""
    value = request.input
    if isinstance(value, str):
        spec = EmbedSpec(inputs=[value])
    elif value and all(isinstance(item, int) for item in value):
        spec = EmbedSpec(tokens=[value])
    elif all(isinstance(item, list) for item in value):
        spec = EmbedSpec(tokens=value)
    else:
        spec = EmbedSpec(inputs=value)
    # OpenAI's API never truncates: an input over the context is an error.
    return _job(job_id, model, spec.model_copy(update={"truncate": False}))


def gemini_embed_to_job(requests: list[EmbedContentRequest], job_id: str, model: str) -> Job:
    """Each request's text parts, joined, are one input; a part that is not
    text is refused (this model embeds text)."""
    inputs = []
    for n, request in enumerate(requests):
        if any(part.text is None for part in request.content.parts):
            raise InvalidRequest(f"requests.{n}.content.parts: only text parts can be embedded",
                                 param=f"requests.{n}.content.parts")
        inputs.append("\n".join(part.text for part in request.content.parts))
    return _job(job_id, model, EmbedSpec(inputs=inputs))


# --- vectors -> replies ---------------------------------------------------------------
class _EmbeddingWriter(Writer):
    """Embeddings are never streamed: only the whole reply (so no in-band
    error either: errors get their status, rendered by the blueprint)."""

    def text(self, text: str):  # pragma: no cover - an embedding job sends no text
        return []

    def finish(self, done):
        return []

    def _vectors(self, transcript: Transcript) -> list[list[float]]:
        return transcript.embedding.vectors if transcript.embedding is not None else []


class OllamaEmbedWriter(_EmbeddingWriter):
    def __init__(self, model: str, dimensions: int | None):
        self.model, self.dimensions = model, dimensions

    def reply(self, transcript: Transcript) -> dict:
        done = transcript.done
        return {"model": self.model, "embeddings": [shortened(v, self.dimensions) for v in self._vectors(transcript)],
                "total_duration": done.timings.total_ns, "load_duration": done.timings.load_ns,
                "prompt_eval_count": done.usage.prompt_tokens}


class OllamaEmbeddingsWriter(_EmbeddingWriter):
    def reply(self, transcript: Transcript) -> dict:
        vectors = self._vectors(transcript)
        return {"embedding": vectors[0] if vectors else []}


class OpenAIEmbeddingsWriter(_EmbeddingWriter):
    def __init__(self, model: str, encoding_format: str, dimensions: int | None):
        self.model, self.encoding_format, self.dimensions = model, encoding_format, dimensions

    def _encoded(self, vector: list[float]):
        vector = shortened(vector, self.dimensions)
        return base64_floats(vector) if self.encoding_format == "base64" else vector

    def reply(self, transcript: Transcript) -> dict:
        prompt = transcript.done.usage.prompt_tokens
        data = [{"object": "embedding", "index": i, "embedding": self._encoded(v)}
                for i, v in enumerate(self._vectors(transcript))]
        return {"object": "list", "data": data, "model": self.model,
                "usage": {"prompt_tokens": prompt, "total_tokens": prompt}}


class GeminiEmbeddingsWriter(_EmbeddingWriter):
    """`batch`: :batchEmbedContents' list, else :embedContent's one."""

    def __init__(self, dimensions: list[int | None], batch: bool):
        self.dimensions, self.batch = dimensions, batch

    def reply(self, transcript: Transcript) -> dict:
        vectors = [{"values": shortened(v, d)} for v, d in zip(self._vectors(transcript), self.dimensions)]
        return {"embeddings": vectors} if self.batch else {"embedding": vectors[0] if vectors else {"values": []}}


# --- job -> upstream request, upstream reply -> vectors ---------------------------------
def openai_upstream_request(spec: EmbedSpec, upstream_model: str) -> tuple[str, dict]:
    return "/embeddings", {"model": upstream_model, "input": spec.tokens if spec.tokens is not None else spec.inputs,
                           "encoding_format": "float"}


def openai_upstream_vectors(body: dict) -> tuple[list[list[float]], int]:
    data = sorted(body.get("data") or [], key=lambda item: item.get("index", 0))
    return [item["embedding"] for item in data], (body.get("usage") or {}).get("prompt_tokens", 0)


def ollama_upstream_request(spec: EmbedSpec, upstream_model: str) -> tuple[str, dict]:
    if spec.tokens is not None:
        raise InvalidRequest("input: token arrays cannot be passed to an Ollama upstream; send text", param="input")
    return "/api/embed", {"model": upstream_model, "input": spec.inputs, "truncate": spec.truncate}


def ollama_upstream_vectors(body: dict) -> tuple[list[list[float]], int]:
    return body.get("embeddings") or [], body.get("prompt_eval_count", 0)
