"""An OpenAPI 3.1 document of the routes, from the pydantic request models."""
from __future__ import annotations

from functools import lru_cache

from pydantic.json_schema import models_json_schema

from dialects.ollama_schemas import ChatRequest, GenerateRequest, ShowRequest
from dialects.openai_schemas import ChatCompletionRequest, CompletionRequest

POST_ROUTES = [
    ("/api/chat", ChatRequest, "Ollama chat (NDJSON stream by default)"),
    ("/api/generate", GenerateRequest, "Ollama completion: raw, FIM (suffix), templates"),
    ("/api/show", ShowRequest, "Ollama model details"),
    ("/v1/chat/completions", ChatCompletionRequest, "OpenAI chat completion (SSE with stream)"),
    ("/v1/completions", CompletionRequest, "OpenAI text completion"),
    ("/chat/completions", ChatCompletionRequest, "Simple chat (NDJSON with stream)"),
    ("/chat/sse", ChatCompletionRequest, "Simple chat over SSE"),
]
GET_ROUTES = [
    ("/", "Liveness text, as Ollama answers"), ("/api/version", "Ollama-compatible version"),
    ("/api/tags", "Models"), ("/api/ps", "Models loaded in workers"), ("/v1/models", "Models (OpenAI)"),
    ("/healthz", "Process up"), ("/readyz", "Redis and workers ready"), ("/metrics", "Prometheus metrics"),
]
_RESPONSES = {"200": {"description": "OK"}, "400": {"description": "Invalid request (the message names the field)"},
              "401": {"description": "Missing or wrong API key"}, "403": {"description": "No access to the model"},
              "404": {"description": "Unknown model"}, "413": {"description": "Body too large"},
              "429": {"description": "Over a limit (OpenAI routes), with Retry-After"},
              "503": {"description": "Busy (Ollama routes), with Retry-After"}}


@lru_cache(maxsize=1)
def openapi_document() -> dict:
    refs, top = models_json_schema([(model, "validation") for _, model, _ in POST_ROUTES],
                                   ref_template="#/components/schemas/{model}")
    paths: dict = {path: {"get": {"summary": summary, "responses": {"200": {"description": "OK"}}}}
                   for path, summary in GET_ROUTES}
    for path, model, summary in POST_ROUTES:
        paths[path] = {"post": {
            "summary": summary,
            "requestBody": {"required": True, "content": {"application/json": {"schema": refs[(model, "validation")]}}},
            "responses": _RESPONSES,
        }}
    return {"openapi": "3.1.0", "info": {"title": "Switchboard", "version": "1.0"}, "paths": paths,
            "components": {"schemas": top.get("$defs", {})}}
