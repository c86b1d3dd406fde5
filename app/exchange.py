"""One model request as the operator sees it afterwards: its record in the
request log (ledger/request_log.py) and its server span (telemetry/tracing.py),
filled in as it goes and written when it ends: a reply's last byte sent or
its client gone, a WebSocket turn's end, a background response's job's end
(whichever of the request and its job ends last).

A request is recorded when it ran a job or failed (status 400 and above);
the others (a model's details, a list) are not. What is recorded never holds
a key or a header: the person is the key's name, the session the client's
own id for it; bodies only where the operator turned them on.
"""
from __future__ import annotations

import time

from flask import g, request

from app import asker
from app.auth import current_key
from app.conversation_log import masked, redact
from app.services import Services
from dialects.hints import client_session
from telemetry import tracing
from protocol.contract import Job
from protocol.events import (
    DoneEvent, EmbeddingEvent, ErrorEvent, Event, ServerToolEvent, TextEvent, ThinkingEvent, ToolCallEvent,
)

API_BLUEPRINTS = {"ollama", "openai", "anthropic", "responses", "gemini", "simple_chat"}


def _user_id(body) -> str | None:
    """Claude Code's `metadata.user_id`, where a body has one."""
    metadata = body.get("metadata") if isinstance(body, dict) else None
    return metadata.get("user_id") if isinstance(metadata, dict) else None


class Exchange:
    def __init__(self, shared: Services, transport: str = "http"):
        self.shared, self.started = shared, time.perf_counter()
        route = request.url_rule.rule if request.url_rule is not None else request.path
        self.record: dict = {"request": g.get("request_id"), "dialect": request.blueprint, "route": route,
                             "transport": transport, "server_tools": 0, "tool_calls": 0}
        name = f"response.create {route}" if transport == "websocket" else f"{request.method} {route}"
        self.span = tracing.start_server_span(name, request.headers, {
            "http.request.method": request.method, "http.route": route, "switchboard.dialect": request.blueprint})
        self.record["trace"] = tracing.trace_id_of(self.span) or None
        self.ran, self.running, self.status, self.noted = False, set(), None, False
        self.body: dict | None = None  # the request and reply, where bodies are kept
        self._sent = None  # the body as the client sent it (parsed JSON), once its view read it
        self._asked: str | None = None  # the model its URL names (asked_for)
        self._reply: list[str] = []

    def heard(self, body) -> None:
        """The request's body, as its view read it (app/routes/common.py's parse_body)."""
        self._sent = body

    def asked_for(self, model: str) -> None:
        """The model its URL names, for an API that names it there (Gemini's), not in the body."""
        self._asked = model

    def note_asker(self, body=None) -> None:
        """Who asked (unknown for a refused key) and for what (`body`, or the
        one its view read), and whether their body is kept: once, when its job
        starts or its answer is sent."""
        body = self._sent if body is None else body
        if self.noted:
            return
        self.noted, shared = True, self.shared
        known = not shared.keys.enabled or "api_key" in g
        person = asker.person(shared.keys.enabled) if known else None
        model = self._asked or (body.get("model") if isinstance(body, dict) else None)
        self.record |= {"person": person, "model": model if isinstance(model, str) else None,
                        "session": client_session(request.headers, _user_id(body))}
        if known and (shared.settings.request_log_bodies or current_key().log_bodies):
            self.body = {"person": person, "request": redact(body)}

    @property
    def traceparent(self) -> str:
        """Its trace context, for its job to carry ("" untraced)."""
        return tracing.traceparent_of(self.span)

    def job_started(self, job: Job) -> None:
        """Its job is about to be queued: what it answers with, and its class."""
        self.note_asker()
        self.ran = True
        self.running.add(job.id)
        self.record |= {"answered": job.model, "priority": "background" if job.background else "interactive"}

    def saw(self, event: Event) -> None:
        """Each of its job's events, as the web process relays it."""
        if "ttft_ms" not in self.record and isinstance(event, (TextEvent, ThinkingEvent, ToolCallEvent,
                                                                EmbeddingEvent)):
            self.record["ttft_ms"] = (time.perf_counter() - self.started) * 1000
        if isinstance(event, TextEvent) and self.body is not None:
            self._reply.append(event.text)
        elif isinstance(event, ToolCallEvent):
            self.record["tool_calls"] += 1
        elif isinstance(event, ServerToolEvent) and event.phase == "result":
            self.record["server_tools"] += 1
        elif isinstance(event, DoneEvent):
            usage = event.usage
            self.record |= {"finish": event.reason, "tokens_in": usage.prompt_tokens,
                            "tokens_out": usage.completion_tokens, "cached": usage.cached_tokens,
                            "tool_rounds": max(event.rounds - 1, 0) if event.rounds else None,
                            "queue_ms": event.timings.queue_ns / 1e6 if event.timings.queue_ns else None}
        elif isinstance(event, ErrorEvent):
            self.record |= {"finish": "error", "error": event.message}  # (cut by the request log)
        if isinstance(event, (DoneEvent, ErrorEvent)) and event.guard:
            self.record["guard"] = event.guard

    def job_closed(self, job_id: str, finished: bool) -> None:
        """Its job ended (told again, by an idempotent close: ignored)."""
        if job_id not in self.running:
            return
        self.running.discard(job_id)
        if not finished and "finish" not in self.record:
            self.record["finish"] = "aborted"
        if not self.running and self.status is not None:
            self._write()

    def close(self, status: int) -> None:
        """The request ended (its job may run on: a background response)."""
        self.status = status
        if not self.running:
            self._write()

    def _write(self) -> None:
        record = self.record | {"status": self.status, "total_ms": (time.perf_counter() - self.started) * 1000}
        if self.status >= 400 and record.get("finish") == "aborted":
            record["finish"] = None  # refused before it ran (a full queue, the rate limit): its status says why
        self._end_span(record)
        if not self.ran and self.status < 400:
            return
        body = None if self.body is None else self.body | {"reply": masked("".join(self._reply))}
        self.shared.records.add(record, body)

    def _end_span(self, record: dict) -> None:
        if self.span is None:
            return
        tracing.annotate(self.span, {  # (the job's span has its tokens and finish)
            "http.response.status_code": record["status"], "switchboard.person": record.get("person"),
            "gen_ai.request.model": record.get("model"), "gen_ai.conversation.id": record.get("session"),
            "switchboard.transport": "websocket" if record["transport"] == "websocket" else None})
        failed = record["status"] >= 500 or record.get("finish") == "error"
        tracing.end(self.span, str(record["status"]) if failed else None)
        self.span = None


class Unrecorded:
    """The Exchange of what is not recorded (a job run outside a request)."""

    traceparent = ""

    def job_started(self, job: Job) -> None:
        pass

    def saw(self, event: Event) -> None:
        pass

    def job_closed(self, job_id: str, finished: bool) -> None:
        pass


UNRECORDED = Unrecorded()
