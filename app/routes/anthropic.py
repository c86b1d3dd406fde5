"""Anthropic's Messages API: /v1/messages (Claude Code, the `anthropic` SDKs).

The base URL is the server root (Claude Code appends /v1/messages); the
query string (Claude Code's `?beta=true`) and the `anthropic-version` and
`anthropic-beta` headers are accepted whatever they say. Errors come in
Anthropic's envelope, a full queue as its 529 overloaded_error.
"""
from __future__ import annotations

from flask import Blueprint, g, request as flask_request

from app.errors import anthropic_error_body, register_error_handlers
from protocol.contract import new_job_id
from app.routes import common
from app.routes.common import check_request_limits, note_tools_left_out, parse_body, serve
from catalog.registry import ModelEntry
from dialects import anthropic as translate, hints
from dialects.anthropic_schemas import CountTokensRequest, MessagesRequest
from dialects.anthropic_writer import MessagesWriter, TokenCountWriter

bp = Blueprint("anthropic", __name__, url_prefix="/v1")
register_error_handlers(bp, anthropic_error_body, queue_full_status=529)


def find_served_model(name: str) -> ModelEntry:
    """Claude Code asks for claude-* names unless each is mapped."""
    return common.find_served_model(name, f"model: {name}")


def beta() -> str:
    """The client's betas, passed on to an Anthropic upstream."""
    return flask_request.headers.get("anthropic-beta", "")


@bp.post("/messages")
def messages():
    request = parse_body(MessagesRequest)
    check_request_limits(request.messages, request.tools)
    entry = find_served_model(request.model)
    note_tools_left_out(translate.server_only_tools(request))
    job = translate.messages_to_job(request, new_job_id(), entry.name, entry.capabilities, entry.info.context_length,
                                    beta())
    hints.apply(job, translate.hints(request, flask_request.headers))
    writer = MessagesWriter(f"msg_{job.id}", entry.name, g.get("request_id"))
    return serve(job, entry, writer, "sse" if request.stream else None)


@bp.post("/messages/count_tokens")
def count_tokens():
    """Counted by a worker of the model, with its own tokenizer (the count a
    reply then reports); an upstream's estimated (Backend.count_tokens)."""
    request = parse_body(CountTokensRequest)
    check_request_limits(request.messages, request.tools)
    entry = find_served_model(request.model)
    job = hints.apply(translate.count_to_job(request, new_job_id(), entry.name, entry.capabilities, beta()),
                      translate.hints(request, flask_request.headers))
    return serve(job, entry, TokenCountWriter(), None)
