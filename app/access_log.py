"""Per request: carry a request id, and write one structured JSON log line
with the key's name (never the key). Prompts are never logged unless asked.

The request id the server's records go by (the request log, its kept
body, the Anthropic error's `request_id`) is always the server's own: a
client may not pick another request's. The client's X-Request-Id, where it
sends one, is kept beside it (`client_request_id` in the log line) and
echoed in the response's X-Request-Id, as clients expect for correlating."""
from __future__ import annotations

import json
import logging
import sys
import time
import uuid
from functools import partial


from flask import Flask, g, request

from app.auth import current_key
from app.pathkey import redact_url
from app.conversation_log import ConversationLog
from app.exchange import API_BLUEPRINTS, Exchange
from app.services import services

from protocol.events import Event, ServerToolEvent

log = logging.getLogger("switchboard.requests")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {"time": self.formatTime(record), "level": record.levelname, "logger": record.name,
                 "message": record.getMessage()}
        entry.update(getattr(record, "fields", {}))
        return json.dumps(entry, ensure_ascii=False)


def _configure_logging() -> None:
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(JsonFormatter())
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False


def install_request_log(app: Flask, log_prompts: bool) -> None:
    """Registered before auth, so a refused request is logged with its id."""
    _configure_logging()

    @app.before_request
    def start():
        g.started = time.perf_counter()
        g.request_id = uuid.uuid4().hex
        client_id = request.headers.get("X-Request-Id", "")[:128]
        if client_id:
            g.client_request_id = client_id
        if request.method == "POST" and request.blueprint in API_BLUEPRINTS:
            g.exchange = Exchange(services())

    @app.after_request
    def stamp(response):
        response.headers["X-Request-Id"] = g.get("client_request_id") or g.get("request_id", "")
        log_request(response.status_code, g.get("started", time.perf_counter()),
                    request.get_json(silent=True) if log_prompts and request.is_json else None)
        exchange = g.get("exchange")
        if exchange is not None:
            exchange.note_asker()  # (the body as its view read it)
            # (its status, not the response: a closure holding the response it is registered on is a reference
            # cycle, and every request's response, job and parsed body would wait for the collector's full pass)
            response.call_on_close(partial(exchange.close, response.status_code))
        return response


def log_request(status: int, started: float, body=None, **fields) -> None:
    """The request's log line (a WebSocket writes one per turn, `fields`
    saying so): what a view noted about it (tools it left out, the model
    that answered) included; the body only if given (SWITCHBOARD_LOG_PROMPTS)."""
    fields = {"request_id": g.get("request_id"), "key": getattr(g.get("api_key"), "name", None),
              "method": request.method, "path": redact_url(request.path), "status": status,
              "ms": round((time.perf_counter() - started) * 1000, 1)} | fields | g.get("log_fields", {})
    fields |= _client_id()
    if body is not None:
        fields["body"] = body
    log.info("request", extra={"fields": fields})


def job_observers(model: str, server_tools: bool) -> list:
    """What watches a request's job events besides its client and its record:
    the conversation log (if kept) and a log line per server tool call."""
    observers: list = []
    log_dir, key_name = services().settings.conversation_log_dir, current_key().name
    ids = {"request_id": g.get("request_id")} | _client_id()
    if log_dir is not None:
        observers.append(ConversationLog(log_dir, ids | {
            "key": key_name, "path": request.path, "model": model, "request": g.get("request_body")}))
    if server_tools:
        observers.append(server_tool_logger(ids, key_name))
    return observers


def _client_id() -> dict:
    """The client's own X-Request-Id, where it sent one (beside ours, never in its place)."""
    return {"client_request_id": g.client_request_id} if g.get("client_request_id") else {}


def server_tool_logger(ids: dict, key_name: str):
    """An observer of a job's events: one log line per server-side tool call
    that ended (server, tool, status, duration; never arguments or results)."""
    def observe(event: Event) -> None:
        if isinstance(event, ServerToolEvent) and event.phase == "result":
            fields = ids | {"key": key_name} | event.summary()
            fields.pop("arguments", None)
            log.info("server_tool", extra={"fields": fields})
    return observe
