"""The OpenAI API: /v1/models, /v1/chat/completions, /v1/completions, /v1/embeddings.

/v1/models is shared: Anthropic's clients get Anthropic's list, Google's
the Gemini API's (app/routes/gemini.py), each told by the headers it sends."""
from __future__ import annotations

import time

from flask import Blueprint, jsonify, request as flask_request

from app.errors import register_error_handlers
from app.routes import gemini
from app.routes.common import check_request_limits, find_model, parse_body, serve, visible_entries
from catalog.registry import ModelEntry
from dialects import anthropic_writer, embeddings, openai as translate, hints
from dialects.openai_schemas import ChatCompletionRequest, CompletionRequest, EmbeddingsRequest
from dialects.openai_writer import ChatWriter, CompletionWriter, error_body
from dialects.tools import custom_tool_names
from protocol.contract import new_job_id

bp = Blueprint("openai", __name__, url_prefix="/v1")
register_error_handlers(bp, error_body)


def _model_object(entry: ModelEntry) -> dict:
    created = int(entry.info.modified_at.timestamp())
    return {"id": entry.name, "object": "model", "created": created, "owned_by": "switchboard"}


def _anthropic_model(entry: ModelEntry) -> dict:
    created = entry.info.modified_at.isoformat().replace("+00:00", "Z")
    return anthropic_writer.model_object(entry.name, entry.display_name or entry.name, created)


def _speaks_anthropic() -> bool:
    """Anthropic's clients (Claude Code's model discovery) send this header
    with every request, and read models in their API's shape."""
    return "anthropic-version" in flask_request.headers


@bp.get("/models")
def models():
    if gemini.speaks_gemini():
        return gemini.list_models()
    entries = visible_entries()
    if _speaks_anthropic():
        return jsonify(anthropic_writer.model_page([_anthropic_model(e) for e in entries], flask_request.args))
    return jsonify({"object": "list", "data": [_model_object(e) for e in entries]})


@bp.get("/models/<path:name>")
def model(name: str):
    if gemini.speaks_gemini():
        return gemini.get_model(name)
    entry = find_model(name)
    return jsonify(_anthropic_model(entry) if _speaks_anthropic() else _model_object(entry))


def _include_usage(request) -> bool:
    return bool(request.stream_options and request.stream_options.include_usage)


def _framing(stream: bool) -> str | None:
    return "sse" if stream else None


@bp.post("/chat/completions")
def chat_completions():
    request = parse_body(ChatCompletionRequest)
    check_request_limits(request.messages, request.tools)
    entry = find_model(request.model)
    job = hints.apply(translate.chat_to_job(request, new_job_id(), entry.name, entry.capabilities),
                      translate.hints(request, flask_request.headers))
    writer = ChatWriter(f"chatcmpl-{job.id}", request.model, int(time.time()), _include_usage(request),
                        custom_tool_names(job.tools))
    return serve(job, entry, writer, _framing(request.stream))


@bp.post("/completions")
def completions():
    request = parse_body(CompletionRequest)
    entry = find_model(request.model)
    job = hints.apply(translate.completion_to_job(request, new_job_id(), entry.name, entry.capabilities),
                      translate.hints(request, flask_request.headers))
    writer = CompletionWriter(f"cmpl-{job.id}", request.model, int(time.time()), _include_usage(request))
    return serve(job, entry, writer, _framing(request.stream))


@bp.post("/embeddings")
def embeddings_():
    request = parse_body(EmbeddingsRequest)
    entry = find_model(request.model)
    job = hints.apply(embeddings.openai_embeddings_to_job(request, new_job_id(), entry.name),
                      translate.hints(request, flask_request.headers))
    return serve(job, entry, embeddings.OpenAIEmbeddingsWriter(request.model, request.encoding_format,
                                                               request.dimensions), None)
