"""The OpenAI API: /v1/models and /v1/chat/completions."""
from __future__ import annotations

import time
from typing import Iterator

from flask import Blueprint, jsonify

from app.errors import ApiError, openai_error_body
from app.jobs import KEEPALIVE, new_job_id
from app.routes.common import (
    check_request_limits, collect, find_model, parse_body, register_error_handlers, start_job, stream_response,
    visible_entries,
)
from app.schemas.openai import ChatCompletionRequest, CompletionRequest
from app.streaming import SSE_CONTENT_TYPE, SSE_DONE, SSE_KEEPALIVE, sse
from app.translate import openai as translate
from workers.contract import DoneEvent, ErrorEvent, Event, TextEvent, ToolCallEvent
from workers.registry import ModelEntry

bp = Blueprint("openai", __name__, url_prefix="/v1")


register_error_handlers(bp, openai_error_body)


def _model_object(entry: ModelEntry) -> dict:
    created = int(entry.info.modified_at.timestamp())
    return {"id": entry.name, "object": "model", "created": created, "owned_by": "switchboard"}


@bp.get("/models")
def models():
    return jsonify({"object": "list", "data": [_model_object(e) for e in visible_entries()]})


@bp.get("/models/<path:name>")
def model(name: str):
    return jsonify(_model_object(find_model(name)))


def _sse_frames(events: Iterator[Event], chunks) -> Iterator[bytes]:
    """Chat or text-completion chunks (the writer decides), then [DONE]."""
    for chunk in chunks.opening():
        yield sse(chunk)
    for event in events:
        if event is KEEPALIVE:
            yield SSE_KEEPALIVE
        elif isinstance(event, TextEvent):
            yield sse(chunks.text(event.text))
        elif isinstance(event, ToolCallEvent):
            for chunk in chunks.tool_call(event):
                yield sse(chunk)
        elif isinstance(event, DoneEvent):
            for chunk in chunks.finish(event):
                yield sse(chunk)
        elif isinstance(event, ErrorEvent):  # after the first byte: in band, then [DONE]
            yield sse(openai_error_body(ApiError(event.status, event.message)))
    yield SSE_DONE


def _serve(request, entry, job, id_prefix: str, chunks_class, build_reply):
    """Start the job; stream its chunks, or answer with one object."""
    run, events = start_job(job, entry, request.stream)
    completion_id, created = f"{id_prefix}-{job.id}", int(time.time())
    if request.stream:
        include_usage = bool(request.stream_options and request.stream_options.include_usage)
        chunks = chunks_class(completion_id, request.model, created, include_usage)
        return stream_response(run, _sse_frames(events, chunks), SSE_CONTENT_TYPE)
    text, calls, done = collect(run, events)
    return jsonify(build_reply(completion_id, created, text, calls, done))


@bp.post("/chat/completions")
def chat_completions():
    request = parse_body(ChatCompletionRequest)
    check_request_limits(request.messages, request.tools)
    entry = find_model(request.model)
    job = translate.chat_to_job(request, new_job_id(), entry.name)
    return _serve(request, entry, job, "chatcmpl", translate.ChatChunks,
                  lambda cid, created, text, calls, done: translate.chat_completion(
                      cid, request.model, created, text, calls, done))


@bp.post("/completions")
def completions():
    request = parse_body(CompletionRequest)
    entry = find_model(request.model)
    job = translate.completion_to_job(request, new_job_id(), entry.name, entry.capabilities)
    return _serve(request, entry, job, "cmpl", translate.CompletionChunks,
                  lambda cid, created, text, _, done: translate.text_completion(cid, request.model, created, text, done))
