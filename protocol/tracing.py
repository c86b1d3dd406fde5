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

The SDK decides (its sampler, from OTEL_TRACES_SAMPLER, for every span),
names (its id generator), describes (its resource, OTEL_RESOURCE_ATTRIBUTES),
batches (BatchSpanProcessor, OTEL_BSP_*) and exports (protocol/otlp.py).
A span is recorded here, a few fields in a slot object, and handed to the
batch processor as the SDK's own ReadableSpan when it ends: the SDK's live
span (a lock, attribute checks, a context to attach) cost more per span than
the rest of a short request's tracing together (docs/benchmarks-notes.md).
The span current in a job is this module's (a context variable, so each
greenlet and thread has its own).
"""
from __future__ import annotations

import os
import socket
import time
from contextvars import ContextVar
from typing import Any, Mapping, NamedTuple

_sdk: Any = None  # what the helpers use of the SDK, once set up; None: tracing is off
_current: ContextVar = ContextVar("switchboard_span", default=None)


class _Sdk(NamedTuple):
    trace: Any  # opentelemetry.trace: SpanContext, TraceFlags, ...
    propagate: Any
    readable: Any  # ReadableSpan, what a finished span is to the processor
    kind: Any  # SpanKind
    error: Any  # Status(StatusCode.ERROR)
    unset: Any  # Status(StatusCode.UNSET)
    fields: tuple  # the headers the propagators read (traceparent, ...), each with its WSGI environ key
    sampler: Any
    ids: Any  # the id generator
    resource: Any
    scope: Any  # InstrumentationScope("switchboard")
    processor: Any  # the batch processor
    limits: Any  # SpanLimits (OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT, OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT)
    follows: bool  # the sampler keeps a remote parent's decision, and adds nothing (see _shortcuts)
    roots: Any  # a new trace's TraceFlags if the sampler keeps every new trace, and adds nothing; else None
    flags: tuple  # TraceFlags by value, for the first two bits (sampled, random trace id)


class Span:
    """A span being recorded (attributes None: the sampler left it out, and
    only its context goes on)."""
    __slots__ = ("name", "context", "parent", "kind", "start", "attributes", "status")

    def __init__(self, name: str, context: Any, parent: Any, kind: Any, start: int, attributes: dict | None):
        self.name, self.context, self.parent, self.kind, self.start = name, context, parent, kind, start
        self.attributes, self.status = attributes, None


def wanted(env: Mapping[str, str] = os.environ) -> bool:
    """An OTLP endpoint is configured and the SDK is not switched off."""
    endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    return bool(endpoint) and env.get("OTEL_SDK_DISABLED", "").strip().lower() != "true"


def setup(service: str) -> bool:
    """Start exporting (once per process) if the environment asks for it;
    `service` is the service.name unless OTEL_SERVICE_NAME gives one."""
    global _sdk
    if _sdk is not None or not wanted():
        return _sdk is not None
    from opentelemetry import propagate, trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import SpanKind, Status, StatusCode

    from protocol.otlp import Exporter

    named = {"service.instance.id": f"{socket.gethostname()}:{os.getpid()}"}  # (once per batch, not per span)
    if not os.environ.get("OTEL_SERVICE_NAME"):
        named["service.name"] = service
    provider = TracerProvider(resource=Resource.create(named))  # OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER
    processor = BatchSpanProcessor(Exporter())  # OTEL_EXPORTER_OTLP_*, OTEL_BSP_*
    provider.add_span_processor(processor)  # (its shutdown at exit flushes the batch)
    trace.set_tracer_provider(provider)
    fields = tuple((f.lower(), "HTTP_" + f.upper().replace("-", "_"))
                   for f in sorted(propagate.get_global_textmap().fields))  # OTEL_PROPAGATORS
    _sdk = _Sdk(trace, propagate, ReadableSpan, SpanKind, Status(StatusCode.ERROR), Status(StatusCode.UNSET), fields,
                provider.sampler, provider.id_generator, provider.resource, InstrumentationScope("switchboard"),
                processor, SpanLimits(), *_shortcuts(provider), tuple(trace.TraceFlags(n) for n in range(4)))
    return True


def _shortcuts(provider: Any) -> tuple[bool, Any]:
    """What the sampler decides without being asked, if it is one of the
    SDK's parent-based ones (OTEL_TRACES_SAMPLER parentbased_*, the default)
    and so keeps their rules. A span under a remote parent (a request's
    server span under a client's trace, a job's under its request's) is
    kept exactly when the parent was, with its trace state and nothing
    added; with the default root sampler, a new trace is always kept. The
    sampler's call cost more than the rest of a span; the decisions are
    the same (tests/unit/test_tracing.py compares them)."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace.sampling import ParentBased
    sampler = provider.sampler
    if not isinstance(sampler, ParentBased) or type(sampler).should_sample is not ParentBased.should_sample:
        return False, None
    description = sampler.get_description()
    follows = "remoteParentSampled:AlwaysOnSampler,remoteParentNotSampled:AlwaysOffSampler," in description
    random = trace.TraceFlags.RANDOM_TRACE_ID if provider.id_generator.is_trace_id_random() else 0
    kept = description.startswith("ParentBased{root:AlwaysOnSampler,")
    return follows, trace.TraceFlags(trace.TraceFlags.SAMPLED | random) if kept else None


def on() -> bool:
    return _sdk is not None


def _start(name: str, parent: Any, kind: Any, attributes: dict, start: int | None = None,
           decided_by: Span | None = None) -> Span:
    """A span under `parent` (a SpanContext; None: a new trace), as the
    SDK's tracer starts one: the sampler decides, with the parent's flags.
    Or as `decided_by` was decided, without asking the sampler again: a
    span of ours under it (whose trace it was asked about) or beside it.
    `attributes` becomes the span's own (a dict the caller made for it)."""
    trace = _sdk.trace
    if decided_by is not None:
        context = decided_by.context
        trace_id, flags, state = context.trace_id, context.trace_flags, context.trace_state
        records = flags & 1
    else:
        if parent is not None and not parent.is_valid:
            parent = None
        if parent is None and _sdk.roots is not None:  # (a new trace: its root sampler keeps all)
            trace_id, flags, state, records = _sdk.ids.generate_trace_id(), _sdk.roots, None, True
        elif parent is not None and parent.is_remote and _sdk.follows:
            trace_id, flags, state = parent.trace_id, _sdk.flags[parent.trace_flags & 3], parent.trace_state
            records = flags & 1
        else:
            trace_id, flags, state, records, attributes = _sampled(name, parent, kind, attributes)
    context = trace.SpanContext(trace_id, _sdk.ids.generate_span_id(), False, flags, state)
    return Span(name, context, parent, kind, start or time.time_ns(), attributes if records else None)


def _sampled(name: str, parent: Any, kind: Any, attributes: dict) -> tuple:
    """What the sampler decides for a span: its trace, flags, trace state,
    whether it is recorded, and its attributes (the sampler's added)."""
    trace = _sdk.trace
    trace_id = parent.trace_id if parent is not None else _sdk.ids.generate_trace_id()
    under = trace.set_span_in_context(trace.NonRecordingSpan(parent)) if parent is not None else None
    decided = _sdk.sampler.should_sample(under, trace_id, name, kind, attributes)
    flags = trace.TraceFlags.SAMPLED if decided.decision.is_sampled() else trace.TraceFlags.DEFAULT
    if parent.trace_flags.random_trace_id if parent is not None else _sdk.ids.is_trace_id_random():
        flags |= trace.TraceFlags.RANDOM_TRACE_ID
    return (trace_id, _sdk.flags[flags], decided.trace_state, decided.decision.is_recording(),
            dict(decided.attributes or {}) | attributes)


def _finish(span: Span, end: int | None = None) -> None:
    """Hand a recorded span to the batch processor (once)."""
    attributes, span.attributes = span.attributes, None
    if attributes is None:
        return
    limits = _sdk.limits
    if limits.max_span_attributes is not None and len(attributes) > limits.max_span_attributes:
        attributes = dict(list(attributes.items())[:limits.max_span_attributes])
    if limits.max_span_attribute_length is not None:
        attributes = {k: v[:limits.max_span_attribute_length] if isinstance(v, str) else v
                      for k, v in attributes.items()}
    _sdk.processor.on_end(_sdk.readable(
        span.name, context=span.context, parent=span.parent, resource=_sdk.resource, attributes=attributes,
        kind=span.kind, status=span.status or _sdk.unset, start_time=span.start, end_time=end or time.time_ns(),
        instrumentation_scope=_sdk.scope))


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
    parent = _sdk.trace.get_current_span(_sdk.propagate.extract(sent)).get_span_context() if sent else None
    return _start(name, parent, _sdk.kind.SERVER, _clean(attributes))


def traceparent_of(span: Span | None) -> str:
    """The span's W3C traceparent, for a job to carry ("" without a span)."""
    if span is None:
        return ""
    context = span.context
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"


def trace_id_of(span: Span | None) -> str:
    """The span's trace id in hex, as tracing systems show it ("" without a
    span, or for a trace the sampler left out: nothing to link to)."""
    if span is None or not span.context.trace_flags.sampled:
        return ""
    return format(span.context.trace_id, "032x")


def recording(span: Span | None) -> bool:
    """The span is kept (the sampler took it) and has not ended: worth describing."""
    return span is not None and span.attributes is not None


def annotate(span: Span | None, attributes: dict) -> None:
    if recording(span):
        span.attributes.update(_clean(attributes))


def fail(span: Span | None, kind: str) -> None:
    """Mark the span failed; `kind` is short (a status, a class), never a secret."""
    if recording(span):
        span.attributes["error.type"] = kind
        span.status = _sdk.error


def end(span: Span | None, error: str | None = None) -> None:
    """End the span; with `error` it failed (see fail)."""
    if span is None:
        return
    if error:
        fail(span, error)
    _finish(span)


def record_span(name: str, attributes: dict, seconds: float, error: str | None = None) -> None:
    """A finished span under the current one, `seconds` long to now (a
    server-tool call, timed by the pool that ran it)."""
    parent = current()
    if parent is None:
        return
    now = time.time_ns()
    span = _start(name, parent.context, _sdk.kind.INTERNAL, _clean(attributes), now - int(seconds * 1e9), parent)
    if error:
        fail(span, error)
    _finish(span, now)


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
    span = _start(name, parent, _sdk.kind.INTERNAL, _clean(attributes), now)
    _finish(_start("queue", parent, _sdk.kind.INTERNAL, {}, min(int(enqueued_at * 1e9), now), span), now)
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


def _parent(traceparent: str) -> Any:
    """The SpanContext of a job's traceparent (ours: W3C, version 00), read
    without the propagators' general parsing; None if it is not one."""
    parts = traceparent.split("-")
    if len(parts) != 4 or len(parts[1]) != 32 or len(parts[2]) != 16:
        return None
    try:
        trace_id, span_id, flags = int(parts[1], 16), int(parts[2], 16), int(parts[3], 16)
    except ValueError:
        return None
    trace = _sdk.trace
    remote = trace.SpanContext(trace_id, span_id, is_remote=True, trace_flags=trace.TraceFlags(flags))
    return remote if remote.is_valid else None


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
    return _Outgoing(_start(method, parent.context if parent is not None else None, _sdk.kind.CLIENT, {
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
