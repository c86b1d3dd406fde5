"""OpenTelemetry traces, for both processes: the official SDK with its
OTLP/HTTP exporter behind a batch processor (a slow or absent collector
never delays a token), configured only by the standard OTEL_* variables.

Off unless OTEL_EXPORTER_OTLP_ENDPOINT (or ..._TRACES_ENDPOINT) is set: then
nothing of the SDK is imported and every helper here returns at its first
branch. On, one request is one trace across processes:

    web:     POST /v1/chat/completions (server; continues a client's traceparent)
    worker:    queue        (its time in the fair queue, recorded when a worker takes it)
               chat <model> (the job: backend, deployment, tokens, first token, finish)
                 POST       (client: the upstream call, which gets our traceparent)
                 execute_tool <name> (a server-side tool call)

The trace context crosses Redis inside the job (Job.traceparent). Span
attributes follow OpenTelemetry's GenAI semantic conventions; prompt and
reply text, keys and headers are never put on a span.

The SDK (set up by telemetry/sdk.py) decides (its sampler, from
OTEL_TRACES_SAMPLER: asked for every span whose decision its rules do not
already give, see sdk.shortcuts), names (its id generator), describes (its
resource, OTEL_RESOURCE_ATTRIBUTES), batches (BatchSpanProcessor, OTEL_BSP_*)
and exports (telemetry/otlp.py).
A span is recorded here, in the few fields OTLP writes (a slot object), and
handed as it is to the batch processor when it ends, for telemetry/otlp.py to
encode: the SDK's live span (a lock, attribute checks, a context to attach)
cost more per span than the rest of a short request's tracing together, and
its SpanContext and ReadableSpan, made for every span, did again in a busy
process (docs/benchmarks-notes.md).
The span current in a job is this module's (a context variable, so each
greenlet and thread has its own).
"""
from __future__ import annotations

import os
import time
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Mapping, NamedTuple

_sdk: Any = None  # telemetry.sdk.Sdk: what the helpers use of the SDK, once set up; None: tracing is off
_current: ContextVar = ContextVar("switchboard_span", default=None)


INTERNAL, SERVER, CLIENT = 0, 1, 2  # SpanKind's values


class Remote(NamedTuple):
    """A span of another process this one continues (a client's, or a job's
    request's in the web process)."""
    trace_id: int
    span_id: int
    flags: int  # W3C trace flags: 1 sampled, 2 random trace id
    state: Any = None  # its TraceState, if it came with one


class Span:
    """A span being recorded, in OTLP's fields. attributes None: the sampler
    left it out, and only its ids go on; end set: it has ended."""
    __slots__ = ("name", "kind", "trace_id", "span_id", "flags", "state", "parent_id", "remote", "start", "end",
                 "attributes", "error", "dropped")

    def __init__(self, name: str, kind: int, ids: tuple, parent: "Span | Remote | None", start: int,
                 attributes: dict | None):
        self.name, self.kind, self.start, self.attributes = name, kind, start, attributes
        self.trace_id, self.span_id, self.flags, self.state = ids
        self.parent_id, self.remote = (parent.span_id, type(parent) is Remote) if parent is not None else (0, False)
        self.end, self.error, self.dropped = 0, False, 0


def wanted(env: Mapping[str, str] = os.environ) -> bool:
    """An OTLP endpoint is configured and the SDK is not switched off."""
    endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    return bool(endpoint) and env.get("OTEL_SDK_DISABLED", "").strip().lower() != "true"


def setup(service: str) -> bool:
    """Start exporting (once per process) if the environment asks for it;
    `service` is the service.name unless OTEL_SERVICE_NAME gives one."""
    global _sdk
    if _sdk is None and wanted():
        from telemetry import sdk
        _sdk = sdk.setup(service)
    return _sdk is not None


def on() -> bool:
    return _sdk is not None


def _start(name: str, parent: Span | Remote | None, kind: int, attributes: dict, start: int | None = None,
           decided_by: Span | None = None) -> Span:
    """A span under `parent` (None: a new trace), as the SDK's tracer starts
    one: the sampler decides, with the parent's flags. Or as `decided_by`
    was decided, without asking the sampler again: a span of ours under it
    (whose trace it was asked about) or beside it. `attributes` becomes the
    span's own (a dict the caller made for it)."""
    if decided_by is not None:
        trace_id, flags, state = decided_by.trace_id, decided_by.flags, decided_by.state
    elif parent is None and _sdk.roots is not None:  # (a new trace: its root sampler keeps all)
        trace_id, flags, state = _sdk.ids.generate_trace_id(), _sdk.roots, None
    elif type(parent) is Remote and _sdk.follows:
        trace_id, flags, state = parent.trace_id, parent.flags & 3, parent.state
    else:
        trace_id, flags, state, attributes = _sampled(name, parent, kind, attributes)
    return Span(name, kind, (trace_id, _sdk.ids.generate_span_id(), flags, state), parent, start or time.time_ns(),
                attributes if flags & 1 else None)


def _sampled(name: str, parent: Span | Remote | None, kind: int, attributes: dict) -> tuple:
    """What the sampler decides for a span: its trace, flags, trace state,
    and attributes (the sampler's added)."""
    trace = _sdk.trace
    context = None if parent is None else trace.SpanContext(
        parent.trace_id, parent.span_id, type(parent) is Remote, trace.TraceFlags(parent.flags), parent.state)
    trace_id = parent.trace_id if parent is not None else _sdk.ids.generate_trace_id()
    under = trace.set_span_in_context(trace.NonRecordingSpan(context)) if context is not None else None
    decided = _sdk.sampler.should_sample(under, trace_id, name, _sdk.kind(kind), attributes)
    flags = trace.TraceFlags.SAMPLED if decided.decision.is_sampled() else trace.TraceFlags.DEFAULT
    if parent.flags & trace.TraceFlags.RANDOM_TRACE_ID if parent is not None else _sdk.ids.is_trace_id_random():
        flags |= trace.TraceFlags.RANDOM_TRACE_ID
    return trace_id, int(flags), decided.trace_state, dict(decided.attributes or {}) | attributes


def _finish(span: Span, end: int | None = None) -> None:
    """Hand a recorded span to the batch processor (once)."""
    if not recording(span):
        return
    limits, attributes = _sdk.limits, span.attributes
    if limits.max_span_attributes is not None and len(attributes) > limits.max_span_attributes:
        span.dropped = len(attributes) - limits.max_span_attributes
        attributes = dict(list(attributes.items())[:limits.max_span_attributes])
    if limits.max_span_attribute_length is not None:
        attributes = {k: v[:limits.max_span_attribute_length] if isinstance(v, str) else v
                      for k, v in attributes.items()}
    span.attributes, span.end = attributes, end or time.time_ns()
    _sdk.emit(span)


def start_server_span(name: str, headers: Any, attributes: dict) -> Span | None:
    """A request's span in the web process, continuing the client's trace
    (W3C traceparent, or what OTEL_PROPAGATORS reads, from `headers`, a
    request's: their names in any case); not made current. None with
    tracing off."""
    if _sdk is None:
        return None
    environ = getattr(headers, "environ", None)  # (werkzeug's request headers: their WSGI environ, read directly)
    if environ is not None:
        sent = {field: value for field, key in _sdk.fields if (value := environ.get(key))}
    else:
        sent = {field: value for field, _ in _sdk.fields if (value := headers.get(field))}  # (case-insensitive)
    sent_by = _sdk.trace.get_current_span(_sdk.propagate.extract(sent)).get_span_context() if sent else None
    parent = Remote(sent_by.trace_id, sent_by.span_id, int(sent_by.trace_flags), sent_by.trace_state) \
        if sent_by is not None and sent_by.is_valid else None
    return _start(name, parent, SERVER, _clean(attributes))


def traceparent_of(span: Span | None) -> str:
    """The span's W3C traceparent, for a job to carry ("" without a span)."""
    if span is None:
        return ""
    return f"00-{span.trace_id:032x}-{span.span_id:016x}-{span.flags:02x}"


def trace_id_of(span: Span | None) -> str:
    """The span's trace id in hex, as tracing systems show it ("" without a
    span, or for a trace the sampler left out: nothing to link to)."""
    if span is None or not span.flags & 1:
        return ""
    return format(span.trace_id, "032x")


def recording(span: Span | None) -> bool:
    """The span is kept (the sampler took it) and has not ended: worth describing."""
    return span is not None and span.attributes is not None and not span.end


def annotate(span: Span | None, attributes: dict) -> None:
    if recording(span):
        span.attributes.update(_clean(attributes))


def fail(span: Span | None, kind: str) -> None:
    """Mark the span failed; `kind` is short (a status, a class), never a secret."""
    if recording(span):
        span.attributes["error.type"] = kind
        span.error = True


def end(span: Span | None, error: str | None = None) -> None:
    """End the span; with `error` it failed (see fail)."""
    if span is None:
        return
    if error:
        fail(span, error)
    _finish(span)


def record_span(name: str, attributes: dict, seconds: float, error: str | None = None,
                parent: Span | None = None) -> None:
    """A finished span under `parent` (else the current one), `seconds` long
    to now (a tool call, timed by the pool that ran it)."""
    parent = parent or current()
    if parent is None:
        return
    now = time.time_ns()
    span = _start(name, parent, INTERNAL, _clean(attributes), now - int(seconds * 1e9), parent)
    if error:
        fail(span, error)
    _finish(span, now)


@dataclass(frozen=True)
class ToolCallSpan:
    """A tool call's span (OpenTelemetry's GenAI `execute_tool`), the same
    whoever made it: an agent through the MCP gateway, a model server-side
    (which names the model's call id)."""

    tool: str
    server: str
    person: str
    call_id: str = ""

    def record(self, seconds: float, outcome: str, parent: Span | None = None) -> None:
        attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": self.tool,
                      "switchboard.mcp_server": self.server, "switchboard.person": self.person}
        if self.call_id:
            attributes["gen_ai.tool.call.id"] = self.call_id
        record_span(f"execute_tool {self.tool}", attributes, seconds, None if outcome == "ok" else outcome, parent)


def job_span(traceparent: str, name: str, attributes: dict, enqueued_at: float) -> "_Current":
    """In a worker: the job's time in the queue (from its web process's
    enqueueing to now), then the job's own span, current while the `with`
    block runs (an upstream call and a tool call become its children).
    The block gets the span (None with tracing off, or for a job sent
    without a trace)."""
    parent = _parent(traceparent) if _sdk is not None and traceparent else None
    if parent is None:
        return _Current(None)
    now = time.time_ns()
    span = _start(name, parent, INTERNAL, _clean(attributes), now)
    _finish(_start("queue", parent, INTERNAL, {}, min(int(enqueued_at * 1e9), now), span), now)
    return _Current(span)


class _Current:
    """A span made current for a `with` block, and ended after it."""
    __slots__ = ("span", "token")

    def __init__(self, span: Span | None):
        self.span, self.token = span, None

    def __enter__(self) -> Span | None:
        if self.span is not None:
            self.token = _current.set(self.span)
        return self.span

    def __exit__(self, *_) -> None:
        if self.span is not None:
            _current.reset(self.token)
            _finish(self.span)


def _parent(traceparent: str) -> Remote | None:
    """The span a job's traceparent names (ours: W3C, version 00), read
    without the propagators' general parsing; None if it is not one."""
    parts = traceparent.split("-")
    if len(parts) != 4 or len(parts[1]) != 32 or len(parts[2]) != 16:
        return None
    try:
        trace_id, span_id, flags = int(parts[1], 16), int(parts[2], 16), int(parts[3], 16)
    except ValueError:
        return None
    return Remote(trace_id, span_id, flags) if trace_id and span_id else None


def current() -> Span | None:
    """The span current in this thread or greenlet (a worker's job span), or None."""
    return _current.get() if _sdk is not None else None


class Call(NamedTuple):
    headers: dict[str, str]  # what carries the trace to the server
    span: Span | None  # for annotate(); None with tracing off


def client_span(method: str, address: str, path: str) -> "_Outgoing":
    """An outgoing HTTP call under the current span, for a `with` block
    (which gets a Call). Not made current: the caller's generator may be
    suspended inside it (a stream), and what runs meanwhile belongs to the
    job, not to the call. Its URL is the server's address and path only (a
    query could hold a key)."""
    if _sdk is None:
        return _Outgoing(None)
    parent = _current.get()
    return _Outgoing(_start(method, parent, CLIENT, {
        "http.request.method": method, "server.address": address, "url.path": path}, None, parent))


class _Outgoing:
    __slots__ = ("span",)

    def __init__(self, span: Span | None):
        self.span = span

    def __enter__(self) -> Call:
        if self.span is None:
            return Call({}, None)
        return Call({"traceparent": traceparent_of(self.span)}, self.span)

    def __exit__(self, error_type: type | None, *_) -> None:
        if self.span is not None:
            if error_type is not None:  # (any: a stream closed early ends it with GeneratorExit)
                fail(self.span, error_type.__name__)
            _finish(self.span)


def _clean(attributes: dict) -> dict:
    """OpenTelemetry takes no None values."""
    return {k: v for k, v in attributes.items() if v is not None}
