"""OpenAI's Responses API: POST /v1/responses (Codex, the OpenAI Agents SDK,
`client.responses.create`).

Nothing is stored yet: a response is answered as `store: false` (what Codex
sends, with the whole history each turn), and `previous_response_id` is
refused, saying so. Errors before the stream are OpenAI's error object;
after it, a `response.failed` event.
"""
from __future__ import annotations

import time

from flask import Blueprint

from app.errors import register_error_handlers
from app.jobs import new_job_id
from app.routes.common import check_request_limits, find_model, note_tools_left_out, parse_body, serve
from dialects import responses as translate
from dialects.responses_schemas import ResponsesRequest
from dialects.responses_writer import ResponsesWriter, error_body
from protocol.errors import InvalidRequest

bp = Blueprint("responses", __name__, url_prefix="/v1")
register_error_handlers(bp, error_body)


@bp.post("/responses")
def responses():
    request = parse_body(ResponsesRequest)
    if request.previous_response_id:
        raise InvalidRequest("previous_response_id: this server keeps no responses yet; send the whole "
                             "conversation in input (as Codex does with store: false)", param="previous_response_id")
    check_request_limits(request.input if isinstance(request.input, list) else None, translate.unfolded(request.tools))
    entry = find_model(request.model)
    note_tools_left_out(translate.server_only_tools(request))
    job = translate.responses_to_job(request, new_job_id(), entry.name, entry.capabilities)
    writer = ResponsesWriter(f"resp_{job.id}", request.model, int(time.time()), translate.request_fields(request),
                             translate.custom_tool_names(request))
    return serve(job, entry, writer, "sse" if request.stream else None)
