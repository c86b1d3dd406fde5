"""OpenAI's Responses API: POST /v1/responses (Codex, the OpenAI Agents SDK,
`client.responses.create`), also over a WebSocket (GET /v1/responses
upgraded: responses_socket.py) and in the background (app/background.py);
compaction (a `compaction_trigger` item, or POST /v1/responses/compact);
and the stored responses: GET, DELETE and cancel /v1/responses/{id}.

A response is stored when the request says `store: true` (OpenAI's
default; Codex sends `store: false` and the whole history each turn), for
its creator only (app/stored_responses.py). What clients keep for us
(sealed reasoning, compactions) is sealed for the person (identity/sealing.py).
Errors before the stream are OpenAI's error object; after it, a
`response.failed` event.
"""
from __future__ import annotations

import itertools
import logging
import time
from typing import Callable

from flask import Blueprint, Response, jsonify, request as flask_request
from redis.exceptions import RedisError

from app import background, stored_responses
from app.asker import person
from app.errors import register_error_handlers
from app.routes import responses_socket
from app.routes.common import (
    check_job, check_request_limits, find_model, note_tools_left_out, parse_body, serve, start_serving,
)
from app.services import services
from app.stored_responses import ConnectionMemory, Conversation
from app.streaming import SSE_CONTENT_TYPE, whole_reply
from catalog.registry import ModelEntry
from dialects import responses as translate, hints
from dialects.responses_schemas import CompactionTriggerItem, ResponsesRequest
from dialects.responses_writer import CompactionWriter, ResponsesWriter, error_body
from dialects.tools import custom_tool_names
from protocol.contract import Job, new_job_id
from protocol.errors import InvalidRequest

log = logging.getLogger(__name__)
bp = Blueprint("responses", __name__, url_prefix="/v1")
register_error_handlers(bp, error_body)


def _owner() -> str:
    return person(services().keys.enabled)


def _stored_history(response_id: str) -> Conversation:
    """The conversation a stored response ends (its creator's only)."""
    return stored_responses.history(services().redis, _owner(), response_id)


def _storing(request: ResponsesRequest, memory: ConnectionMemory | None = None):
    """What the writer calls with the finished response, if it is to be kept
    (in Redis, and in a WebSocket's `memory`). If Redis went away since the
    answer came (a restart, a failover), the answer stands (it was made, and
    counted): it says `store: false`."""
    if not request.store and memory is None:
        return None
    shared, owner, items = services(), _owner(), translate.input_items(request)

    def store(response: dict) -> None:
        if memory is not None:
            memory.save(response, items, request.previous_response_id)
        if not request.store:
            return
        try:
            stored_responses.save(shared.redis, owner, response, items, request.previous_response_id,
                                  shared.settings.responses_ttl_seconds)
        except RedisError as error:
            log.warning("response %s answered but not stored: %s", response["id"], error)
            response["store"] = False
    return store


def prepared(request: ResponsesRequest, history: Callable[[str], Conversation],
             on_final: Callable[[dict], None] | None) -> tuple[Job, ModelEntry, ResponsesWriter]:
    """A response's job, its model and its writer (over HTTP or a WebSocket):
    `history` gives the conversation a `previous_response_id` continues (its
    first response names the job's session, unless the client names one)."""
    entry, chain = find_model(request.model), ""
    if request.previous_response_id:
        conversation = history(request.previous_response_id)
        request, chain = translate.continued(request, conversation), conversation.root
    sealer, owner = services().sealer, _owner()
    request = translate.opened(request, lambda kind, blob, field: sealer.open(kind, owner, blob, field))
    compacting = translate.is_compaction(request)
    if compacting:  # Codex's remote compaction: the model's summary, sealed in one compaction item
        request = translate.compaction_request(request)
    check_request_limits(request.input if isinstance(request.input, list) else None, translate.unfolded(request.tools))
    note_tools_left_out(translate.server_only_tools(request))
    job = translate.responses_to_job(request, new_job_id(), entry.name, entry.capabilities)
    job.session = f"response:{chain}" if chain else ""  # a chain of responses is a session (the client's own wins)
    hints.apply(job, translate.hints(request, flask_request.headers))
    made = (f"resp_{job.id}", request.model, int(time.time()), translate.request_fields(request))
    if compacting:
        return job, entry, CompactionWriter(*made, lambda text: sealer.seal("compaction", owner, text), on_final)
    writer = ResponsesWriter(*made, custom_tool_names(job.tools), on_final)
    writer.namespaces = translate.namespaces(request.tools)
    if "reasoning.encrypted_content" in request.include:
        writer.seal_reasoning = lambda text: sealer.seal("reasoning", owner, text)
    return job, entry, writer


@bp.post("/responses")
def responses():
    request = parse_body(ResponsesRequest)
    if request.background:
        return _in_the_background(request)
    job, entry, writer = prepared(request, _stored_history, _storing(request))  # (its own input, not the history)
    return serve(job, entry, writer, "sse" if request.stream else None)


def _in_the_background(request: ResponsesRequest) -> Response:
    """Queued and answered at once (`queued`), or streamed from its event log."""
    if not request.store:
        raise InvalidRequest("background: a background response is kept for polling, so store must be true",
                             param="store")
    shared, owner, items = services(), _owner(), translate.input_items(request)
    job, entry, writer = prepared(request, _stored_history, None)
    check_job(job, entry)
    queued = background.start(shared, job, entry, writer, lambda pipe, response: stored_responses.save(
        pipe, owner, response, items, request.previous_response_id, shared.settings.responses_ttl_seconds))
    if request.stream:
        return _event_log(queued["id"], -1)
    return jsonify(queued)


def _event_log(response_id: str, after: int) -> Response:
    shared = services()
    frames = background.events_after(shared, _owner(), response_id, after)
    first = next(frames, b"")  # (one that is not the caller's, or not in the background: an error before it)
    response = Response(itertools.chain([first], frames), content_type=SSE_CONTENT_TYPE)
    response.headers["Cache-Control"] = "no-cache"
    response.headers["X-Accel-Buffering"] = "no"
    return response


@bp.post("/responses/compact")
def compact():
    """Codex's first remote compaction (v1): the conversation in, the items
    Codex keeps out: the newest user messages word for word, then one
    compaction item holding the model's summary, sealed."""
    request = parse_body(ResponsesRequest)
    if request.previous_response_id:
        request = translate.continued(request, _stored_history(request.previous_response_id))
    kept = translate.kept_user_messages(request)
    triggered = request.model_copy(update={"input": translate.as_items(request) + [
        CompactionTriggerItem(type="compaction_trigger")], "previous_response_id": None, "store": False})
    job, entry, writer = prepared(triggered, lambda _: [], None)
    run, events = start_serving(job, entry, writer, stream=False)
    try:
        reply = whole_reply(events, writer, tuple(run.observers))
    finally:
        run.close()
    response = jsonify({"id": reply["id"], "object": "response.compaction", "created_at": reply["created_at"],
                        "output": kept + reply["output"], "usage": reply["usage"]})
    response.headers["X-Switchboard-Model"] = run.job.model
    return response


@bp.get("/responses", websocket=True)  # werkzeug routes an upgrade only to rules marked so
@bp.get("/responses")  # without the upgrade: 426
def websocket():
    """The Responses API over a WebSocket (app/routes/responses_socket.py)."""
    def prepare(request: ResponsesRequest, memory: ConnectionMemory):
        return prepared(request, memory.history, _storing(request, memory))
    return responses_socket.serve_socket(ConnectionMemory(services().redis, _owner()), prepare)


@bp.get("/responses/<response_id>")
def stored(response_id: str):
    """A stored response; a background one's events with `stream=true`,
    after `starting_after` (a sequence number) if given."""
    if flask_request.args.get("stream", "").lower() in ("true", "1"):
        try:
            after = int(flask_request.args.get("starting_after", -1))
        except ValueError:
            raise InvalidRequest("starting_after: must be an integer (a sequence number)",
                                 param="starting_after") from None
        return _event_log(response_id, after)
    return jsonify(background.current(services().redis, _owner(), response_id))


@bp.post("/responses/<response_id>/cancel")
def cancel(response_id: str):
    return jsonify(background.cancel(services().redis, _owner(), response_id))


@bp.delete("/responses/<response_id>")
def delete(response_id: str):
    stored_responses.delete(services().redis, _owner(), response_id)
    return jsonify({"id": response_id, "object": "response", "deleted": True})
