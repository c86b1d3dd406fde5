"""The Ollama API: /, /api/version, /api/tags, /api/show, /api/ps, /api/chat, /api/generate,
/api/embed, /api/embeddings."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from flask import Blueprint, Response, jsonify, request as flask_request

from app.auth import current_key, public
from app.errors import register_error_handlers
from app.errors import ApiError
from app.routes.common import check_request_limits, find_model, parse_body, serve, visible_entries
from app.services import services
from app.streaming import NDJSON_CONTENT_TYPE, ndjson
from catalog.registry import ModelEntry
from dialects import embeddings, ollama as translate, hints
from protocol.contract import new_job_id
from dialects.ollama_schemas import (
    ChatRequest, EmbeddingsRequest, EmbedRequest, GenerateRequest, PullRequest, ShowRequest,
)
from dialects.ollama_writer import ChatWriter, GenerateWriter, error_body
from protocol.errors import UnknownModel
from protocol.presence import loaded_models

# Copilot Chat lists no model from a server older than 0.6.4.
OLLAMA_COMPAT_VERSION = "0.12.0"

bp = Blueprint("ollama", __name__)
register_error_handlers(bp, error_body, busy_status=503)


@bp.route("/", methods=["GET", "HEAD"])
@public
def root():
    return Response("Ollama is running", content_type="text/plain; charset=utf-8")


@bp.get("/api/version")
@public
def version():
    return jsonify({"version": OLLAMA_COMPAT_VERSION})


def _details(entry: ModelEntry) -> dict:
    info = entry.info
    return {
        "parent_model": "",
        "format": info.format,
        "family": info.family,
        "families": [info.family],
        "parameter_size": info.parameter_size,
        "quantization_level": info.quantization_level,
    }


def _summary(entry: ModelEntry) -> dict:
    info = entry.info
    return {
        "name": entry.name,
        "model": entry.name,
        "modified_at": info.modified_at.isoformat(),
        "size": info.size,
        "digest": info.digest,
        "details": _details(entry),
    }


@bp.get("/api/tags")
def tags():
    return jsonify({"models": [_summary(e) for e in visible_entries()]})


def _parameters_text(parameters: dict) -> str:
    """Ollama's `parameters` is Modelfile text: one `name value` per line."""
    return "\n".join(f"{name} {value}" for name, value in parameters.items())


@bp.post("/api/show")
def show():
    entry = find_model(parse_body(ShowRequest).model_name)
    info = entry.info
    return jsonify({
        "license": "",
        "modelfile": f"FROM {entry.name}\n",
        "parameters": _parameters_text(info.parameters),
        "template": info.template,
        "details": _details(entry),
        "model_info": {
            "general.architecture": info.architecture,
            "general.basename": info.basename,
            f"{info.architecture}.context_length": info.context_length,
            # Not Ollama's: how many jobs a worker decodes together, each with the context above.
            "switchboard.parallel": info.parallel,
        },
        "capabilities": entry.capabilities,
        "modified_at": info.modified_at.isoformat(),
    })


@bp.get("/api/ps")
def ps():
    registry, now = services().registry, datetime.now(timezone.utc)
    running = []
    for name, seconds_left in loaded_models(services().redis).items():
        if name in registry.names() and current_key().allows(name):
            entry = registry.get(name)
            expires = (now + timedelta(seconds=max(seconds_left, 0))).isoformat()
            running.append(_summary(entry) | {"expires_at": expires, "size_vram": 0,
                                              "context_length": entry.info.context_length})
    return jsonify({"models": running})


def _framing(stream: bool) -> str | None:
    return "ndjson" if stream else None


@bp.post("/api/chat")
def chat():
    request = parse_body(ChatRequest)
    check_request_limits(request.messages, request.tools)
    entry = find_model(request.model)
    job = hints.apply(translate.chat_to_job(request, new_job_id(), entry.name, entry.capabilities),
                      translate.hints(request, flask_request.headers))
    return serve(job, entry, ChatWriter(request.model), _framing(request.stream))


@bp.post("/api/generate")
def generate():
    request = parse_body(GenerateRequest)
    entry = find_model(request.model)
    job = hints.apply(translate.generate_to_job(request, new_job_id(), entry.name, entry.capabilities),
                      translate.hints(request, flask_request.headers))
    return serve(job, entry, GenerateWriter(request.model, with_context=not request.raw), _framing(request.stream))


@bp.post("/api/embed")
def embed():
    request = parse_body(EmbedRequest)
    entry = find_model(request.model)
    job = hints.apply(embeddings.ollama_embed_to_job(request, new_job_id(), entry.name),
                      translate.hints(request, flask_request.headers))
    return serve(job, entry, embeddings.OllamaEmbedWriter(request.model, request.dimensions), None)


@bp.post("/api/embeddings")
def embeddings_legacy():
    request = parse_body(EmbeddingsRequest)
    entry = find_model(request.model)
    job = hints.apply(embeddings.ollama_embeddings_to_job(request, new_job_id(), entry.name),
                      translate.hints(request, flask_request.headers))
    return serve(job, entry, embeddings.OllamaEmbeddingsWriter(), None)


# --- model management: the registry is the operator's ---------------------------------
def _pull_statuses(entry: ModelEntry) -> list[dict]:
    """What Ollama streams while pulling, for a model that is already here:
    clients and tools pull before use and wait for "success"."""
    info = entry.info
    return [{"status": "pulling manifest"},
            {"status": f"pulling {info.digest[:12]}", "digest": f"sha256:{info.digest}", "total": info.size,
             "completed": info.size},
            {"status": "verifying sha256 digest"}, {"status": "writing manifest"}, {"status": "success"}]


@bp.post("/api/pull")
def pull():
    request = parse_body(PullRequest)
    try:
        entry = find_model(request.model_name)
    except UnknownModel:
        raise ApiError(404, f'pull model manifest: file does not exist ("{request.model_name}" is not in this '
                            "server's registry; models are managed by its operator)") from None
    statuses = _pull_statuses(entry)
    if not request.stream:
        return jsonify(statuses[-1])
    return Response(b"".join(ndjson(s) for s in statuses), content_type=NDJSON_CONTENT_TYPE)


MANAGED = "models are managed in this server's registry (models.toml) by its operator, not through the API"


@bp.route("/api/create", methods=["POST"])
@bp.route("/api/copy", methods=["POST"])
@bp.route("/api/push", methods=["POST"])
@bp.route("/api/delete", methods=["DELETE"])
@bp.route("/api/blobs/<path:digest>", methods=["HEAD", "POST"])
def manage(digest: str | None = None):
    raise ApiError(403, MANAGED)
