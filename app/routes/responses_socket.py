"""The Responses API over a WebSocket (OpenAI's WebSocket mode, which Codex's
built-in provider opens first): GET /v1/responses upgraded, then one
`response.create` message per turn (the create body, `type` added), each
answered with the events the SSE stream of POST /v1/responses gives, in
the same order, one JSON text message each: the same job, writer and frame
loop, framed as messages.

- The key is checked before the upgrade: 401, never a socket without a key.
- One turn at a time: a `response.create` while one runs gets an `error`
  event at once, and the running one goes on. A bad message gets an `error`
  event naming the problem (OpenAI's error object with its `status`), and
  the socket stays open.
- `previous_response_id` continues a response made on this socket, stored or
  not (Codex sends `store: false` and only the turn's new items); a stored
  one from anywhere, as over HTTP.
- The client's close mid-response aborts the job, as a closed stream does.
- Keep-alives while a job waits are pings; Codex ignores them, proxies do not.
- `generate: false` (Codex warms a new socket with its prompt so) answers a
  response with no output and runs no job; the next turn continues it.
- Past SWITCHBOARD_WEBSOCKET_MAX_SECONDS, the next turn is refused with
  OpenAI's `websocket_connection_limit_reached` and the socket closed: Codex
  takes that as "open a new socket" and sends the turn again on it.
- Switched off (SWITCHBOARD_RESPONSES_WEBSOCKET=false), the upgrade gets 426
  at once: Codex then uses HTTP for the session, without retrying.
- On a web process's shutdown an idle socket is closed at once (1012,
  service restart), a busy one after its turn.
"""
from __future__ import annotations

import json
import logging
import time
import uuid
from typing import Callable, Iterator

from flask import Response, g, request
from pydantic import ValidationError

from app.errors import ApiError, ClientGone, known_error
from app.jobs import JobRun
from app.exchange import Exchange
from app.access_log import log_request
from app.routes.common import start_serving
from app.services import services
from app.stored_responses import ConnectionMemory
from app.streaming import frame_groups, websocket_text
from app.websocket import BINARY, WebSocket, is_upgrade
from catalog.registry import ModelEntry
from dialects.responses_schemas import ResponsesRequest
from dialects.responses_writer import ResponsesWriter, error_body
from protocol.contract import Job
from protocol.events import DoneEvent, Event, FinishReason
from protocol.errors import SwitchboardError

log = logging.getLogger(__name__)

Prepare = Callable[[ResponsesRequest, ConnectionMemory], tuple[Job, ModelEntry, ResponsesWriter]]
LIMIT_CODE = "websocket_connection_limit_reached"  # Codex's signal to open a new socket
SERVICE_RESTART = 1012
# Codex's acknowledgement that it read a response (an earlier version of its protocol): nothing to do.
ACKNOWLEDGEMENTS = {"response.processed"}


class UpgradeRequired(SwitchboardError):
    status = 426

    def __init__(self, message: str, upgrade: bool):
        super().__init__(message)
        self.upgrade = upgrade

    @property
    def headers(self) -> dict[str, str]:
        return {"Upgrade": "websocket", "Connection": "Upgrade"} if self.upgrade else {}


class _HandedOver(Response):
    """The view's answer once the socket was the WebSocket's: 101 in the
    request log, and nothing for gunicorn to write (it closes the socket)."""

    def __call__(self, environ, start_response):
        raise StopIteration()


def serve_socket(memory: ConnectionMemory, prepare: Prepare) -> Response:
    shared = services()
    if not shared.settings.responses_websocket:
        raise UpgradeRequired("the Responses WebSocket is switched off on this server: POST /v1/responses", False)
    if not is_upgrade(request.environ) or "gunicorn.socket" not in request.environ:
        raise UpgradeRequired("GET /v1/responses is the Responses WebSocket: send a WebSocket upgrade, "
                              "or POST /v1/responses", True)
    socket = WebSocket.accept(request.environ, [], shared.settings.max_body_bytes)
    session = Session(socket, memory, prepare, time.monotonic() + shared.settings.websocket_max_seconds)
    shared.open_sockets.add(session)
    try:
        session.serve()
    finally:
        shared.open_sockets.discard(session)
        socket.close()
        socket.wait_closed(1.0)
    return _HandedOver(status=101)


class Session:
    """One socket's turns, and the memory its continuations read."""

    def __init__(self, socket: WebSocket, memory: ConnectionMemory, prepare: Prepare, deadline: float):
        self.socket, self.memory, self.prepare, self.deadline = socket, memory, prepare, deadline
        self.busy, self.stopping = False, False
        self.run: JobRun | None = None
        socket.intercept = self._while_busy
        socket.on_close = self._closed

    def serve(self) -> None:
        while not self.stopping:
            message = self.socket.receive()
            if message is None:
                return
            self.busy = True
            try:
                self._handle(message)
            finally:
                self.busy = False
        self.socket.close(SERVICE_RESTART, "the server is restarting: open a new socket")

    def stop(self) -> None:
        """Shutdown: an idle socket closes now, a busy one after its turn."""
        self.stopping = True
        if not self.busy:
            self.socket.close(SERVICE_RESTART, "the server is restarting: open a new socket")

    # --- a message ---------------------------------------------------------------------------
    def _handle(self, message) -> None:
        try:
            body = create_body(message)
        except SwitchboardError as error:
            self.send_error(error)
            return
        if body is not None:
            self._turn(body)

    def _while_busy(self, message) -> bool:
        """In the reader, for every message: during a turn, answered now
        (True); between turns, left for `serve` (False)."""
        if not self.busy:
            return False
        try:
            if create_body(message) is not None:
                self.send_error(ApiError(409, "a response is already in progress on this socket: send the next "
                                              "response.create after its response.completed"))
        except SwitchboardError as error:
            self.send_error(error)
        return True

    def _closed(self) -> None:
        if self.run is not None:
            self.run.client_left()

    def _refuse_past_limit(self) -> int:
        minutes = services().settings.websocket_max_seconds / 60
        message = (f"Responses websocket connection limit reached ({minutes:g} minutes). Create a new websocket "
                   "connection to continue.")
        self.send_error(ApiError(400, message), LIMIT_CODE)
        self.socket.close(1000, "connection limit reached")
        return 400

    # --- a turn ------------------------------------------------------------------------------
    def _turn(self, body: dict) -> None:
        g.request_id, g.log_fields, g.request_body = uuid.uuid4().hex, {}, body
        g.exchange = exchange = Exchange(services(), transport="websocket")  # the turn's record and span
        exchange.note_asker(body)
        started, status = time.perf_counter(), 200
        try:
            status = self._run_turn(body)
        finally:
            self.busy = False  # its reply is out: the next create may come while its record is written
            settings = services().settings
            log_request(status, started, body if settings.log_prompts else None, transport="websocket",
                        generate=body.get("generate", True), continues=body.get("previous_response_id"))
            g.log_fields, g.exchange = {}, None  # (the socket's own line, at its end, says nothing of its last turn)
            exchange.close(status)

    def _run_turn(self, body: dict) -> int:
        """The turn's status: 200 once its events began, else its error's."""
        if time.monotonic() > self.deadline:
            return self._refuse_past_limit()
        try:
            try:
                parsed = ResponsesRequest.model_validate(body)
            except ValidationError as error:
                raise ApiError.from_validation(error) from None
            job, entry, writer = self.prepare(parsed, self.memory)
            if not parsed.generate:
                return self._warm(writer)
            run, events = start_serving(job, entry, writer, stream=True, watch_client=False)
        except Exception as error:  # before the stream: an error event, in its place
            known = known_error(error)
            if known is None:
                log.exception("unhandled error in a Responses WebSocket turn")
                known = SwitchboardError("internal error; see the server log", 500)
            self.send_error(known)
            return known.status
        self.run = run
        try:
            self._relay(run, events, writer)
        finally:
            self.run = None
            run.close()
        return 200

    def _warm(self, writer: ResponsesWriter) -> int:
        """`generate: false`: a response with no output and no job, for the
        next turn to continue (Codex sends its prompt so when a socket opens)."""
        for frame in [*writer.opening(), *writer.finish(DoneEvent(reason=FinishReason.STOP))]:
            self.socket.send(websocket_text(frame))
        return 200

    def _relay(self, run: JobRun, events: Iterator[Event], writer: ResponsesWriter) -> None:
        try:
            for group in frame_groups(events, writer, tuple(run.observers), run.has_waiting):
                for frame in group:
                    text = websocket_text(frame)
                    if text is None:
                        self.socket.ping()
                    elif not self.socket.send(text):
                        return  # the client left: closing the run aborts the job
        except ClientGone:
            return

    def send_error(self, error: SwitchboardError, code: str | None = None) -> None:
        self.socket.send(json.dumps(error_event(error, code), ensure_ascii=False))


def error_event(error: SwitchboardError, code: str | None = None) -> dict:
    """OpenAI's WebSocket error: the error object, its HTTP status, and the
    headers an HTTP answer would have had (Retry-After)."""
    body = error_body(error)["error"]
    if code is not None:
        body["code"] = code
    event = {"type": "error", "status": error.status, "error": body}
    return event | ({"headers": error.headers} if error.headers else {})


def create_body(message) -> dict | None:
    """A `response.create` message's create body; None for a message that
    needs nothing; anything else a 400 naming the problem."""
    if message is BINARY:
        raise ApiError(400, "messages must be text frames holding JSON (a response.create event)")
    try:
        event = json.loads(message)
    except ValueError as error:
        raise ApiError(400, f"the message is not valid JSON: {error}") from None
    if not isinstance(event, dict):
        raise ApiError(400, "a message must be a JSON object (a response.create event)")
    kind = event.get("type")
    if isinstance(kind, str) and kind in ACKNOWLEDGEMENTS:
        return None
    if kind != "response.create":
        raise ApiError(400, f"type: {kind!r} is not an event this socket takes; send response.create", "type")
    if event.get("background"):
        raise ApiError(400, "background: responses over a WebSocket stream on it; POST /v1/responses for "
                            "background work", "background")
    return {key: value for key, value in event.items() if key not in ("type", "stream")}
