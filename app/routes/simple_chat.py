"""The simple chat API: POST /chat/completions (one object, or NDJSON with
`stream: true`) and POST /chat/sse (SSE ending in `data: [END]`)."""
from __future__ import annotations

import time
from typing import Iterator

from flask import Blueprint, Response, jsonify

from app.errors import ApiError, ClientGone
from app.jobs import KEEPALIVE, new_job_id
from app.routes.common import (
    check_request_limits, client_gone_response, collect, find_model, parse_body, register_error_handlers, start_job,
    stream_response,
)
from app.schemas.openai import ChatCompletionRequest
from app.streaming import NDJSON_CONTENT_TYPE, SSE_CONTENT_TYPE, SSE_KEEPALIVE, ndjson, sse
from app.translate import openai as openai_translate
from app.translate import simple_chat as translate
from workers.contract import DoneEvent, ErrorEvent, Event, TextEvent

SSE_END = b"data: [END]\n\n"

bp = Blueprint("simple_chat", __name__, url_prefix="/chat")
register_error_handlers(bp, translate.error_body)


def _start(request: ChatCompletionRequest, stream: bool):
    check_request_limits(request.messages, request.tools)
    entry = find_model(request.model)
    job = openai_translate.chat_to_job(request, new_job_id(), entry.name)
    return job.id, start_job(job, entry, stream)


@bp.post("/completions")
def completions():
    request = parse_body(ChatCompletionRequest)
    job_id, (run, events) = _start(request, request.stream)
    if request.stream:
        def frames() -> Iterator[bytes]:
            for item in _with_errors(events, lambda e: ndjson(translate.error_body(e)), None):
                yield item if isinstance(item, bytes) else ndjson(item)
        return stream_response(run, frames(), NDJSON_CONTENT_TYPE)
    text, _, _ = collect(run, events)
    return jsonify(translate.reply(f"chat-{job_id}", request.model, int(time.time()), text))


def _with_errors(events: Iterator[Event], render_error, keepalive: bytes | None) -> Iterator[dict | bytes]:
    """Lines for text and done; an error after the first byte, in band. A
    keep-alive is the given bytes, or (None) a line with empty content."""
    lines = translate.Lines()
    for event in events:
        if event is KEEPALIVE:
            yield keepalive if keepalive is not None else lines.text("")
        elif isinstance(event, TextEvent):
            yield lines.text(event.text)
        elif isinstance(event, DoneEvent):
            yield lines.done()
        elif isinstance(event, ErrorEvent):
            yield render_error(ApiError(event.status, event.message))


def sse_error(error: ApiError) -> bytes:
    return b"event: error\n" + sse(translate.error_object(error)) + SSE_END


@bp.post("/sse")
def sse_stream():
    try:
        request = parse_body(ChatCompletionRequest)
        _, (run, events) = _start(request, True)
    except ApiError as error:  # before the stream: the status, but still this route's SSE shape
        return Response(sse_error(error), status=error.status, content_type=SSE_CONTENT_TYPE,
                        headers=error.headers)
    except ClientGone as gone:
        return client_gone_response(gone)

    def frames() -> Iterator[bytes]:
        for item in _with_errors(events, sse_error, SSE_KEEPALIVE):
            if isinstance(item, bytes):  # a keep-alive, or an error (which ends the stream itself)
                yield item
                if item is not SSE_KEEPALIVE:
                    return
                continue
            yield sse(item)
        yield SSE_END
    return stream_response(run, frames(), SSE_CONTENT_TYPE)
