"""The MCP gateway for agents: /mcp (every MCP server the key may use, their
tools and prompts named `<server>__<name>`) and /mcp/<server> (one server,
its own names), over streamable HTTP in both eras (dialects/mcp.py).

A POST carries one JSON-RPC message. A notification (or a response) is
accepted with 202. A request is answered with one JSON object, or, for a
call that asked for progress (`_meta.progressToken`) from a client that
accepts SSE, with a stream: its progress notifications, then the response.
GET offers no server-to-client stream (405, as the spec lets a server
answer); DELETE ends a session. Keys come as every API takes them (Bearer,
x-api-key, the key in the path for clients that only take a URL).
"""
from __future__ import annotations

import time
from functools import partial

import gevent
import gevent.queue
from flask import Blueprint, Response, g, jsonify, request

from app import asker, boundary
from app.auth import current_key
from app.errors import register_error_handlers
from app.mcp_gateway import Caller, ClientLeft, Endpoint, Sessions
from app.mcp_methods import INSTRUCTIONS, Methods
from app.services import services
from app.streaming import SSE_CONTENT_TYPE, sse
from dialects import mcp
from dialects.mcp import INVALID_REQUEST, Message, RpcError
from dialects.writer import KEEPALIVE_COMMENT, NamedEvent
from protocol.gateway import cancel
from telemetry import tracing

bp = Blueprint("mcp", __name__)
SESSION_HEADER = "Mcp-Session-Id"
KEEPALIVE_SECONDS = 15.0


def _error_body(error) -> dict:
    return {"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": error.message}}


register_error_handlers(bp, _error_body)


def _accepts() -> tuple[bool, bool]:
    """(JSON, SSE) by the Accept header; a client that sends none takes either."""
    kinds = [part.split(";")[0].strip().lower() for part in request.headers.get("Accept", "*/*").split(",")]
    anything = "*/*" in kinds
    return (anything or "application/json" in kinds or "application/*" in kinds,
            anything or "text/event-stream" in kinds or "text/*" in kinds)


def _rpc(payload: dict, status: int = 200, headers: dict | None = None) -> Response:
    response = jsonify(payload)
    response.status_code = status
    response.headers.update(headers or {})
    return response


def _endpoint(server: str | None) -> tuple[Endpoint | None, str]:
    shared = services()
    return Endpoint.of(list(shared.registry.servers), current_key().grants, server), server or "*"


def _not_here(server: str | None) -> Response:
    return jsonify({"error": f'no MCP server "{server}" here for this key'}), 404


@bp.post("/mcp")
@bp.post("/mcp/<server>")
def post(server: str | None = None):
    endpoint, endpoint_name = _endpoint(server)
    if endpoint is None:
        return _not_here(server)
    takes_json, takes_sse = _accepts()
    if not takes_json:
        return jsonify({"error": "Not Acceptable: the client must accept application/json"}), 406
    try:
        message = mcp.parse_message(request.get_data())
    except RpcError as error:
        return _rpc(mcp.error_response(None, error), 400)
    g.log_fields = g.get("log_fields", {}) | {"mcp_method": message.method}
    era = mcp.era_of(message, request.headers.get("MCP-Protocol-Version"))
    exchange = Exchange(endpoint, endpoint_name, era, message)
    if not message.is_request:
        return exchange.notified()
    return exchange.answer(takes_sse)


@bp.get("/mcp")
@bp.get("/mcp/<server>")
def get(server: str | None = None):
    """No stream of the server's own messages: the gateway sends none (its
    tool lists change with the keys file and the registry, read per request)."""
    return Response(status=405, headers={"Allow": "POST, DELETE"})


@bp.delete("/mcp")
@bp.delete("/mcp/<server>")
def delete(server: str | None = None):
    endpoint, endpoint_name = _endpoint(server)
    if endpoint is None:
        return _not_here(server)
    sessions = Sessions(services().redis)
    session_id = request.headers.get(SESSION_HEADER, "")
    if sessions.find(session_id, asker.person(services().keys.enabled), endpoint_name) is None:
        return jsonify({"error": "Not Found: no such session"}), 404
    sessions.close(session_id)
    return Response(status=204)


def _takes_url_elicitation(capabilities) -> bool:
    """A client's capabilities declare URL-mode elicitation (2025-11-25: `elicitation: {url: {}}`)."""
    elicitation = capabilities.get("elicitation") if isinstance(capabilities, dict) else None
    return isinstance(elicitation, dict) and isinstance(elicitation.get("url"), dict)


class Exchange:
    """One POSTed message and its answer."""

    def __init__(self, endpoint: Endpoint, endpoint_name: str, era: mcp.Era, message: Message):
        self.shared, self.endpoint, self.endpoint_name = services(), endpoint, endpoint_name
        self.era, self.message = era, message
        self.person = asker.person(self.shared.keys.enabled)
        self.sessions = Sessions(self.shared.redis)
        self.session_id: str | None = None
        self.url_elicitation = False
        self.methods: Methods | None = None
        self.started = time.perf_counter()
        route = request.url_rule.rule if request.url_rule is not None else request.path
        self.span = tracing.start_server_span(f"POST {route}", request.headers, {
            "http.request.method": "POST", "http.route": route, "switchboard.dialect": "mcp",
            "rpc.method": message.method}) if message.is_request else None
        self.record = {"request": g.get("request_id"), "person": self.person, "dialect": "mcp", "route": route,
                       "transport": "http", "trace": tracing.trace_id_of(self.span) or None}

    # --- notifications ------------------------------------------------------------
    def notified(self) -> Response:
        """A notification: a session-era `notifications/cancelled` cancels
        the call its request runs (a stateless-era client closes its stream)."""
        session_id = request.headers.get(SESSION_HEADER, "")
        if self.era == "session" and self.message.method == "notifications/cancelled" and \
                self.sessions.find(session_id, self.person, self.endpoint_name) is not None:
            call_id = self.sessions.call_of(session_id, self.message.params.get("requestId"))
            if call_id is not None:
                cancel(self.shared.redis, call_id)
        return Response(status=202)

    # --- requests -----------------------------------------------------------------
    def answer(self, takes_sse: bool) -> Response:
        response = self._answer(takes_sse)
        if response.mimetype != "text/event-stream":  # (a stream ends its exchange itself)
            response.call_on_close(partial(self.ended, response.status_code))
        return response

    def ended(self, status: int) -> None:
        """Once the client has its answer: its span ends; a tool call leaves
        its records (the request log, metrics, the day's tool use)."""
        if self.methods is not None and self.methods.pending is not None:
            self.methods.pending()
        noted = self.methods.noted if self.methods is not None else {}
        tracing.annotate(self.span, {"http.response.status_code": status, "switchboard.person": self.person,
                                     "gen_ai.tool.name": noted.get("tool")})
        tracing.end(self.span, noted.get("finish") if noted.get("finish") not in (None, "ok") else None)
        if "finish" not in noted:
            return
        body = noted.pop("body", None)
        record = self.record | noted | {"status": status, "total_ms": (time.perf_counter() - self.started) * 1000}
        self.shared.records.add(record, body)

    def _answer(self, takes_sse: bool) -> Response:
        try:
            if self.era == "stateless":
                mcp.check_stateless(self.message, request.headers.get)
            elif self.message.method == "initialize":
                self._methods().meter()
                return self._initialize()
            else:
                self._resume_session()
            if self.message.method == "server/discover":
                return self._reply(mcp.discover_result(INSTRUCTIONS))
            methods = self._methods()
            if takes_sse and mcp.progress_token(self.message) is not None:
                return self._streamed(methods)
            return self._reply(methods.answer(self.message))
        except RpcError as error:
            return self._failed(error)
        except ClientLeft:
            return Response(status=499)

    def _initialize(self) -> Response:
        params = self.message.params
        result = mcp.initialize_result(params.get("protocolVersion"), INSTRUCTIONS)
        client = params.get("clientInfo") if isinstance(params.get("clientInfo"), dict) else {}
        capabilities = params.get("capabilities") if isinstance(params.get("capabilities"), dict) else {}
        session_id = self.sessions.open(self.person, self.endpoint_name, result["protocolVersion"], client,
                                        _takes_url_elicitation(capabilities))
        g.log_fields = g.get("log_fields", {}) | {"mcp_client": str(client.get("name", ""))[:100]}
        return _rpc(mcp.response(self.message, result), headers={SESSION_HEADER: session_id})

    def _resume_session(self) -> None:
        session_id = request.headers.get(SESSION_HEADER)
        if not session_id:
            raise _HttpError(400, "Bad Request: no Mcp-Session-Id (send initialize first, or use the 2026-07-28 "
                                  "protocol, which needs none)")
        session = self.sessions.find(session_id, self.person, self.endpoint_name)
        if session is None:
            raise _HttpError(404, "Not Found: no such session (it ended, or belongs to another key): initialize "
                                  "again")
        self.session_id, self.url_elicitation = session_id, session.get("url_elicitation") == "1"

    def _methods(self) -> Methods:
        key, settings = current_key(), self.shared.settings
        caller = Caller(self.shared, self.person, key.own_headers_env, request.environ,
                        root=boundary.public_root(settings))
        if self.era == "stateless":
            self.url_elicitation = _takes_url_elicitation(self.message.meta.get(mcp.CLIENT_CAPABILITIES_META))
        methods = Methods(self.shared, self.endpoint, caller, self.person,
                          (key.requests_per_minute or settings.requests_per_minute,
                           key.tool_calls_per_minute or settings.tool_calls_per_minute),
                          log_bodies=settings.request_log_bodies or key.log_bodies, span=self.span,
                          session=self.session_id, url_elicitation=self.url_elicitation)
        self.methods = methods
        if self.session_id is not None:
            request_id = self.message.id
            methods.hooks.on_start = lambda call_id: self.sessions.running(self.session_id, request_id, call_id)
        return methods

    def _reply(self, result: dict) -> Response:
        return _rpc(mcp.response(self.message, mcp.for_era(self.era, self.message.method, result)))

    def _failed(self, error: RpcError) -> Response:
        if isinstance(error, _HttpError):
            return _rpc(mcp.error_response(self.message.id, RpcError(INVALID_REQUEST, error.message)), error.status)
        return _rpc(mcp.error_response(self.message.id, error), mcp.error_status(self.era, error))

    def _streamed(self, methods: Methods) -> Response:
        """Progress notifications as they come, then the response (SSE)."""
        queue = gevent.queue.Queue()
        token = mcp.progress_token(self.message)
        methods.hooks.on_progress = lambda body: queue.put(
            {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token} | body})

        def run() -> None:
            try:
                queue.put(mcp.response(self.message, mcp.for_era(self.era, self.message.method,
                                                                 methods.answer(self.message))))
            except RpcError as error:
                queue.put(mcp.error_response(self.message.id, error))
            except ClientLeft:
                pass
            finally:
                queue.put(None)

        worker = gevent.spawn(run)

        def frames():
            try:
                while True:
                    try:
                        item = queue.get(timeout=KEEPALIVE_SECONDS)
                    except gevent.queue.Empty:
                        yield sse(KEEPALIVE_COMMENT)
                        continue
                    if item is None:
                        return
                    yield sse(NamedEvent("message", item))
            finally:
                worker.kill()  # (its call ends first: a tool call's records and slot are then in `pending`)
                self.ended(200)

        return Response(frames(), content_type=SSE_CONTENT_TYPE,
                        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


class _HttpError(RpcError):
    """A transport failure of the session era: an HTTP status, not a JSON-RPC one."""

    def __init__(self, status: int, message: str):
        super().__init__(INVALID_REQUEST, message)
        self.status = status


