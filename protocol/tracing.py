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
"""
from __future__ import annotations

import os
import socket
import time
from contextlib import contextmanager
from typing import Any, Iterator, Mapping, NamedTuple

_tracer: Any = None  # the SDK's tracer once set up; None: tracing is off
_sdk: Any = None  # what the helpers use of the SDK, imported once by setup()


class _Sdk(NamedTuple):
    trace: Any
    propagate: Any
    kind: Any  # SpanKind
    status: Any  # Status(StatusCode.ERROR)
    fields: frozenset  # the headers the propagators read (traceparent, ...)


def wanted(env: Mapping[str, str] = os.environ) -> bool:
    """An OTLP endpoint is configured and the SDK is not switched off."""
    endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    return bool(endpoint) and env.get("OTEL_SDK_DISABLED", "").strip().lower() != "true"


def setup(service: str) -> bool:
    """Start exporting (once per process) if the environment asks for it;
    `service` is the service.name unless OTEL_SERVICE_NAME gives one."""
    global _tracer, _sdk
    if _tracer is not None or not wanted():
        return _tracer is not None
    from opentelemetry import propagate, trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.trace import SpanKind, Status, StatusCode

    named = {"service.instance.id": f"{socket.gethostname()}:{os.getpid()}"}  # (once per batch, not per span)
    if not os.environ.get("OTEL_SERVICE_NAME"):
        named["service.name"] = service
    provider = TracerProvider(resource=Resource.create(named))  # OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))  # OTEL_EXPORTER_OTLP_*, OTEL_BSP_*
    trace.set_tracer_provider(provider)
    fields = frozenset(f.lower() for f in propagate.get_global_textmap().fields)  # OTEL_PROPAGATORS
    _sdk = _Sdk(trace, propagate, SpanKind, Status(StatusCode.ERROR), fields)
    _tracer = provider.get_tracer("switchboard")
    return True


def on() -> bool:
    return _tracer is not None


def start_server_span(name: str, headers: Mapping[str, str], attributes: dict) -> Any:
    """A request's span in the web process, continuing the client's trace
    (W3C traceparent, or what OTEL_PROPAGATORS reads); not made current.
    None with tracing off."""
    if _tracer is None:
        return None
    sent = {k.lower(): v for k, v in headers.items() if k.lower() in _sdk.fields}
    return _tracer.start_span(name, context=_sdk.propagate.extract(sent) if sent else None,
                              kind=_sdk.kind.SERVER, attributes=_clean(attributes))


def traceparent_of(span: Any) -> str:
    """The span's W3C traceparent, for a job to carry ("" without a span)."""
    if span is None:
        return ""
    context = span.get_span_context()
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"


def trace_id_of(span: Any) -> str:
    """The span's trace id in hex, as tracing systems show it ("" without a
    span, or for a trace the sampler left out: nothing to link to)."""
    if span is None or not span.get_span_context().trace_flags.sampled:
        return ""
    return format(span.get_span_context().trace_id, "032x")


def annotate(span: Any, attributes: dict) -> None:
    if span is not None:
        span.set_attributes(_clean(attributes))


def fail(span: Any, kind: str) -> None:
    """Mark the span failed; `kind` is short (a status, a class), never a secret."""
    if span is not None:
        span.set_attribute("error.type", kind)
        span.set_status(_sdk.status)


def end(span: Any, error: str | None = None) -> None:
    """End the span; with `error` it failed (see fail)."""
    if span is None:
        return
    if error:
        fail(span, error)
    span.end()


def record_span(name: str, attributes: dict, seconds: float, error: str | None = None) -> None:
    """A finished span under the current one, `seconds` long to now (a
    server-tool call, timed by the pool that ran it)."""
    parent = current()
    if parent is None:
        return
    now = time.time_ns()
    span = _tracer.start_span(name, context=_sdk.trace.set_span_in_context(parent), attributes=_clean(attributes),
                              start_time=now - int(seconds * 1e9))
    if error:
        fail(span, error)
    span.end(end_time=now)


@contextmanager
def job_span(traceparent: str, name: str, attributes: dict, enqueued_at: float) -> Iterator[Any]:
    """In a worker: the job's time in the queue (from its web process's
    enqueueing to now), then the job's own span, current while it runs (an
    upstream call and a tool call become its children). Yields the span
    (None with tracing off, or for a job sent without a trace)."""
    if _tracer is None or not traceparent:
        yield None
        return
    parent = _parent(traceparent)
    if parent is None:
        yield None
        return
    now = time.time_ns()
    queued = _tracer.start_span("queue", context=parent, start_time=min(int(enqueued_at * 1e9), now))
    queued.end(end_time=now)
    with _tracer.start_as_current_span(name, context=parent, attributes=_clean(attributes),
                                       record_exception=False, set_status_on_exception=False) as span:
        yield span


def _parent(traceparent: str) -> Any:
    """The context of a job's traceparent (ours: W3C, version 00), read
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
    return trace.set_span_in_context(trace.NonRecordingSpan(remote)) if remote.is_valid else None


def current() -> Any:
    """The span current in this thread or greenlet (a worker's job span), or None."""
    if _tracer is None:
        return None
    span = _sdk.trace.get_current_span()
    return span if span.get_span_context().is_valid else None


class Call(NamedTuple):
    headers: dict[str, str]  # what carries the trace to the server
    span: Any  # for annotate(); None with tracing off


@contextmanager
def client_span(method: str, address: str, path: str) -> Iterator[Call]:
    """An outgoing HTTP call under the current span. Not made current: the
    caller's generator may be suspended inside it (a stream), and what runs
    meanwhile belongs to the job, not to the call. Its URL is the server's
    address and path only (a query could hold a key)."""
    if _tracer is None:
        yield Call({}, None)
        return
    span = _tracer.start_span(method, kind=_sdk.kind.CLIENT, attributes={
        "http.request.method": method, "server.address": address, "url.path": path})
    try:
        yield Call({"traceparent": traceparent_of(span)}, span)
    except BaseException as error:
        fail(span, type(error).__name__)
        raise
    finally:
        span.end()


def _clean(attributes: dict) -> dict:
    """OpenTelemetry takes no None values."""
    return {k: v for k, v in attributes.items() if v is not None}
