"""telemetry/otlp.py writes tracing's spans straight into OTLP's protobuf:
the bytes must be the very bytes the official exporter's encoder makes of
the same spans, as the SDK's ReadableSpan, for every shape of span tracing
makes."""
from __future__ import annotations

import pytest

pytest.importorskip("opentelemetry.sdk")
pytest.importorskip("opentelemetry.proto")

from opentelemetry import trace  # noqa: E402
from opentelemetry.attributes import BoundedAttributes  # noqa: E402
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans  # noqa: E402
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest  # noqa: E402
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan  # noqa: E402
from opentelemetry.sdk.util.instrumentation import InstrumentationScope  # noqa: E402
from opentelemetry.trace import SpanKind, Status, StatusCode, TraceState  # noqa: E402

from telemetry import otlp  # noqa: E402
from telemetry.tracing import CLIENT, INTERNAL, SERVER, Remote, Span  # noqa: E402

RESOURCE = Resource.create({"service.name": "web", "service.instance.id": "h:1"})
SCOPE = InstrumentationScope("switchboard")
DESCRIBED = otlp.Described.of(RESOURCE, SCOPE)
TRACE = 0x4bf92f3577b34da6a3ce929d0e0e4736


def _span(name: str, kind: int, span_id: int, parent: Span | Remote | None, attributes: dict, *,
          error: bool = False, state: TraceState | None = None, flags: int = 1) -> Span:
    span = Span(name, kind, (TRACE, span_id, flags, state), parent, 1_700_000_000_000_000_000 + span_id, attributes)
    span.end, span.error = span.start + 12_345_678, error
    return span


def _readable(span: Span) -> ReadableSpan:
    """The same span, as the SDK's tracer would have handed it over."""
    parent = trace.SpanContext(TRACE, span.parent_id, span.remote) if span.parent_id else None
    attributes = span.attributes  # (the SDK counts what its limit dropped: the oldest go)
    if span.dropped:
        attributes = BoundedAttributes(len(attributes), {f"old {n}": n for n in range(span.dropped)} | attributes)
    return ReadableSpan(span.name, trace.SpanContext(span.trace_id, span.span_id, False, trace.TraceFlags(span.flags),
                                                     span.state), parent=parent, resource=RESOURCE,
                        attributes=attributes, kind=SpanKind(span.kind),
                        status=Status(StatusCode.ERROR if span.error else StatusCode.UNSET),
                        start_time=span.start, end_time=span.end, instrumentation_scope=SCOPE)


def _every_shape() -> list[Span]:
    client = Remote(TRACE, 0x00f067aa0ba902b7, 1, TraceState([("vendor", "v1"), ("other", "x")]))
    server = _span("POST /v1/chat/completions", SERVER, 1, client, {
        "http.request.method": "POST", "http.response.status_code": 200, "switchboard.person": "alice"},
        state=client.state)
    job = _span("chat échec ✓", INTERNAL, 2, Remote(TRACE, 1, 1), {
        "gen_ai.usage.input_tokens": 12, "gen_ai.usage.output_tokens": 0, "negative": -5, "big": 2 ** 62,
        "ttft": 0.0031, "zero": 0.0, "streamed": True, "not": False, "empty": "",
        "gen_ai.response.finish_reasons": ["stop", "length"], "counts": [1, -2, 3], "flags": [True],
        "ratios": [0.5, 1.5], "none": []})
    queue = _span("queue", INTERNAL, 3, Remote(TRACE, 1, 3), {})
    call = _span("POST", CLIENT, 4, job, {"http.response.status_code": 502, "error.type": "502"}, error=True)
    tool = _span("execute_tool read", INTERNAL, 5, job, {"error.type": "timeout"}, error=True)
    root = _span("GET /api/tags", SERVER, 6, None, {"k": "v" * 300})
    root.dropped = 3
    return [server, job, queue, call, tool, root]


def test_the_bytes_are_the_official_encoders():
    spans = _every_shape()
    official = encode_spans([_readable(span) for span in spans])
    assert ExportTraceServiceRequest.FromString(otlp.encode(spans, DESCRIBED)) == official
    assert otlp.encode(spans, DESCRIBED) == official.SerializeToString(deterministic=True)  # the same bytes, in fact
    assert otlp.encode([], DESCRIBED) == b""


def test_a_batch_encoded_in_chunks_holds_every_span_in_order():
    spans = [_span(f"span {n}", INTERNAL, n + 1, None, {"n": n}) for n in range(2 * otlp.CHUNK + 5)]
    chunked = ExportTraceServiceRequest.FromString(otlp.encode_yielding(spans, DESCRIBED))
    assert len(chunked.resource_spans) == 3  # one per chunk, each whole
    flat = [span for rs in chunked.resource_spans for ss in rs.scope_spans for span in ss.spans]
    assert flat == [span for rs in encode_spans([_readable(s) for s in spans]).resource_spans
                    for ss in rs.scope_spans for span in ss.spans]


def test_every_attribute_type_the_sdk_accepts_is_written_and_nothing_else():
    assert otlp._varint(300) == b"\xac\x02" and otlp._varint(-1) == b"\xff" * 9 + b"\x01"
    with pytest.raises(TypeError):
        otlp._value(object())


def test_values_python_calls_equal_keep_their_own_bytes():
    """What is written once and reused is told apart by type: 1, 1.0 and
    True are equal in Python, as are the lists [True] and [1]; a string and
    a list of that one string are not the same attribute either."""
    spans = [_span("s", INTERNAL, n + 1, None, {"k": value}) for n, value in enumerate(
        (1, 1.0, True, "a", ["a"], [True], [1], ("a",), 1, True, ["a"], "a", [1.0], [True]))]
    assert ExportTraceServiceRequest.FromString(otlp.encode(spans, DESCRIBED)) == \
        encode_spans([_readable(span) for span in spans])
