"""The simple chat API: POST /chat/completions (one object, or NDJSON with
`stream: true`) and POST /chat/sse (SSE ending in `data: [END]`)."""
from __future__ import annotations

import time

from flask import Blueprint, Response, request as flask_request

from app.errors import ClientGone, client_gone_response, register_error_handlers
from app.routes.common import check_request_limits, find_model, parse_body, serve
from app.streaming import SSE_CONTENT_TYPE, sse
from dialects import openai as translate, hints
from dialects.openai_schemas import ChatCompletionRequest
from dialects.simple_chat import EventsWriter, LinesWriter, error_body
from protocol.contract import new_job_id
from protocol.errors import SwitchboardError

bp = Blueprint("simple_chat", __name__, url_prefix="/chat")
register_error_handlers(bp, error_body)


def _serve(writer_class, framing_when_streamed: str, stream: bool) -> Response:
    request = parse_body(ChatCompletionRequest)
    check_request_limits(request.messages, request.tools)
    entry = find_model(request.model)
    job = hints.apply(translate.chat_to_job(request, new_job_id(), entry.name),
                      translate.hints(request, flask_request.headers))
    writer = writer_class(f"chat-{job.id}", request.model, int(time.time()))
    return serve(job, entry, writer, framing_when_streamed if stream or request.stream else None)


@bp.post("/completions")
def completions():
    return _serve(LinesWriter, "ndjson", stream=False)


@bp.post("/sse")
def sse_stream():
    try:
        return _serve(EventsWriter, "sse", stream=True)
    except SwitchboardError as error:  # before the stream: the status, but still this route's SSE shape
        writer = EventsWriter("", "", 0)
        body = b"".join(sse(frame) for frame in writer.error(error) + writer.closing())
        return Response(body, status=error.status, content_type=SSE_CONTENT_TYPE, headers=error.headers)
    except ClientGone as gone:
        return client_gone_response(gone)
