"""The OpenTelemetry SDK as tracing uses it (telemetry/tracing.py), set up
from the standard OTEL_* variables: its sampler, id generator, resource,
span limits and batch processor, and the exporter.

Tracing's fast path hands its own span records (tracing.Span) to the batch
processor's queue and writes their protobuf itself (telemetry/otlp.py). That
needs three things the SDK does not promise, being private: the
BatchSpanProcessor's `_batch_processor` (its `emit`), and the
OTLPSpanExporter's `_client` (its `export` of bytes) and `_shutdown`. `setup`
looks for them; an SDK without them gets the SDK's own path instead, each
span handed to the processor's public `on_end` as a ReadableSpan and encoded
by the SDK's exporter (the same spans, slower), with one warning naming what
was missing. requirements.txt pins the SDK and lists what to re-check on an
upgrade.
"""
from __future__ import annotations

import logging
import os
import socket
from typing import Any, Callable, NamedTuple

log = logging.getLogger(__name__)


class Sdk(NamedTuple):
    trace: Any  # opentelemetry.trace: SpanContext, TraceFlags, ... (for the sampler)
    propagate: Any
    kind: Any  # SpanKind
    fields: tuple  # the headers the propagators read (traceparent, ...), each with its WSGI environ key
    sampler: Any
    ids: Any  # the id generator
    emit: Callable[[Any], None]  # a finished span to the batch processor
    limits: Any  # SpanLimits (OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT, OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT)
    follows: bool  # the sampler keeps a remote parent's decision, and adds nothing (see shortcuts)
    roots: int | None  # a new trace's flags if the sampler keeps every new trace, and adds nothing; else None


def setup(service: str) -> Sdk:
    """The SDK, exporting; `service` is the service.name unless
    OTEL_SERVICE_NAME gives one."""
    from opentelemetry import propagate, trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import SpanLimits, TracerProvider
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import SpanKind

    named = {"service.instance.id": f"{socket.gethostname()}:{os.getpid()}"}  # (once per batch, not per span)
    if not os.environ.get("OTEL_SERVICE_NAME"):
        named["service.name"] = service
    provider = TracerProvider(resource=Resource.create(named))  # OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER
    processor, emit = _batching(provider.resource, InstrumentationScope("switchboard"))
    provider.add_span_processor(processor)  # (OTEL_EXPORTER_OTLP_*, OTEL_BSP_*; its shutdown at exit flushes)
    trace.set_tracer_provider(provider)
    fields = tuple((f.lower(), "HTTP_" + f.upper().replace("-", "_"))
                   for f in sorted(propagate.get_global_textmap().fields))  # OTEL_PROPAGATORS
    return Sdk(trace, propagate, SpanKind, fields, provider.sampler, provider.id_generator, emit, SpanLimits(),
               *shortcuts(provider))


def _batching(resource, scope) -> tuple[Any, Callable[[Any], None]]:
    """The batch processor, and how a finished span reaches it: as it is
    (our encoder), or as a ReadableSpan (the SDK's) where the SDK lacks what
    the fast path needs."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from telemetry.otlp import Exporter

    exporter = Exporter(resource, scope)
    processor = BatchSpanProcessor(exporter)
    gone = missing(processor, exporter)
    if gone is None:
        return processor, processor._batch_processor.emit
    log.warning("tracing: this OpenTelemetry SDK has no %s; spans go through the SDK's own span objects and "
                "encoder (slower; see telemetry/sdk.py)", gone)
    processor.shutdown()  # (nothing was queued on it)
    processor = BatchSpanProcessor(OTLPSpanExporter())
    return processor, lambda span: processor.on_end(readable(span, resource, scope))


def missing(processor, exporter) -> str | None:
    """What of the SDK's private surface the fast path needs and cannot find
    (None: all of it is there)."""
    if not callable(getattr(getattr(processor, "_batch_processor", None), "emit", None)):
        return "BatchSpanProcessor._batch_processor.emit"
    if not callable(getattr(getattr(exporter, "_client", None), "export", None)):
        return "OTLPSpanExporter._client.export"
    if not hasattr(exporter, "_shutdown"):
        return "OTLPSpanExporter._shutdown"
    return None


def readable(span, resource, scope):
    """Tracing's span as the SDK's tracer would have handed it over."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.trace import SpanKind, Status, StatusCode

    parent = trace.SpanContext(span.trace_id, span.parent_id, span.remote) if span.parent_id else None
    context = trace.SpanContext(span.trace_id, span.span_id, False, trace.TraceFlags(span.flags), span.state)
    return ReadableSpan(span.name, context, parent=parent, resource=resource, attributes=span.attributes,
                        kind=SpanKind(span.kind), status=Status(StatusCode.ERROR if span.error else StatusCode.UNSET),
                        start_time=span.start, end_time=span.end, instrumentation_scope=scope)


def shortcuts(provider: Any) -> tuple[bool, int | None]:
    """What the sampler decides without being asked, if it is one of the
    SDK's parent-based ones (OTEL_TRACES_SAMPLER parentbased_*, the default)
    and so keeps their rules. A span under a remote parent (a request's
    server span under a client's trace, a job's under its request's) is
    kept exactly when the parent was, with its trace state and nothing
    added; with the default root sampler, a new trace is always kept. The
    sampler's call cost more than the rest of a span; the decisions are
    the same (tests/unit/test_tracing.py compares them). Read from the
    sampler's description: worded otherwise (a new SDK), no shortcut is
    taken and the sampler is asked for every span (correct, slower)."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace.sampling import ParentBased
    sampler = provider.sampler
    if not isinstance(sampler, ParentBased) or type(sampler).should_sample is not ParentBased.should_sample:
        return False, None
    description = sampler.get_description()
    follows = "remoteParentSampled:AlwaysOnSampler,remoteParentNotSampled:AlwaysOffSampler," in description
    random = trace.TraceFlags.RANDOM_TRACE_ID if provider.id_generator.is_trace_id_random() else 0
    kept = description.startswith("ParentBased{root:AlwaysOnSampler,")
    return follows, trace.TraceFlags.SAMPLED | random if kept else None
