"""protocol/otlp.py writes spans straight into OTLP's protobuf: the bytes
must decode to exactly the message the official exporter's encoder builds,
for every kind of span the SDK can hand an exporter."""
from __future__ import annotations

import pytest

pytest.importorskip("opentelemetry.sdk")
pytest.importorskip("opentelemetry.proto")

from opentelemetry import trace  # noqa: E402
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans  # noqa: E402
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest  # noqa: E402
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult  # noqa: E402
from opentelemetry.trace import SpanKind, Status, StatusCode, TraceState  # noqa: E402

from protocol import otlp  # noqa: E402


class Kept(SpanExporter):
    def __init__(self):
        self.spans = []

    def export(self, spans):
        self.spans += spans
        return SpanExportResult.SUCCESS


def _spans(service: str, kept: Kept, scope_version: str | None = None) -> None:
    provider = TracerProvider(resource=Resource.create({"service.name": service, "service.instance.id": "h:1"}),
                              shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(kept))
    tracer = provider.get_tracer("switchboard", scope_version)
    remote = trace.SpanContext(0x4bf92f3577b34da6a3ce929d0e0e4736, 0x00f067aa0ba902b7, is_remote=True,
                               trace_flags=trace.TraceFlags(1), trace_state=TraceState([("vendor", "v1")]))
    with tracer.start_as_current_span("POST /v1/chat/completions", context=trace.set_span_in_context(
            trace.NonRecordingSpan(remote)), kind=SpanKind.SERVER, attributes={
            "http.request.method": "POST", "http.response.status_code": 200, "switchboard.person": "alice"}):
        with tracer.start_as_current_span("chat échec ✓", attributes={
                "gen_ai.usage.input_tokens": 12, "gen_ai.usage.output_tokens": 0, "negative": -5,
                "big": 2 ** 62, "ttft": 0.0031, "zero": 0.0, "streamed": True, "not": False, "empty": "",
                "gen_ai.response.finish_reasons": ["stop", "length"], "counts": [1, -2, 3], "flags": [True],
                "ratios": [0.5, 1.5], "none": []}) as job:
            job.add_event("first token", {"at": 3}, timestamp=1_700_000_000_000_000_123)
            job.add_link(remote, {"why": "continued"})
            client = tracer.start_span("POST", kind=SpanKind.CLIENT, start_time=1)
            client.set_status(Status(StatusCode.ERROR, "upstream 502"))
            client.end(end_time=2 ** 63 + 5)
            failed = tracer.start_span("execute_tool read", kind=SpanKind.INTERNAL)
            failed.set_status(Status(StatusCode.ERROR))
            failed.end()
            tracer.start_span("ok", kind=SpanKind.CONSUMER).set_status(Status(StatusCode.OK))
    tracer.start_span("root", kind=SpanKind.PRODUCER).end()


def test_the_bytes_decode_to_the_official_encoders_message():
    kept = Kept()
    _spans("web", kept)
    _spans("worker", kept, scope_version="2.0")  # a second resource and scope in one batch
    assert len(kept.spans) >= 10
    official = encode_spans(kept.spans)
    ours = ExportTraceServiceRequest.FromString(otlp.encode(kept.spans))
    assert ours == official
    assert otlp.encode(kept.spans) == official.SerializeToString(deterministic=True)  # the same bytes, in fact


def test_a_batch_encoded_in_chunks_holds_every_span_in_order():
    kept = Kept()
    provider = TracerProvider(resource=Resource.create({"service.name": "web"}), shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(kept))
    for number in range(2 * otlp.CHUNK + 5):
        provider.get_tracer("switchboard").start_span(f"span {number}", attributes={"n": number}).end()
    chunked = ExportTraceServiceRequest.FromString(otlp.encode_yielding(kept.spans))
    assert len(chunked.resource_spans) == 3  # one per chunk, each whole
    flat = [span for rs in chunked.resource_spans for ss in rs.scope_spans for span in ss.spans]
    assert flat == [span for rs in encode_spans(kept.spans).resource_spans for ss in rs.scope_spans
                    for span in ss.spans]


def test_every_attribute_type_the_sdk_accepts_is_written_and_nothing_else():
    assert otlp._varint(300) == b"\xac\x02" and otlp._varint(-1) == b"\xff" * 9 + b"\x01"
    with pytest.raises(TypeError):
        otlp._value(object())


def test_values_python_calls_equal_keep_their_own_bytes():
    """What is written once and reused is told apart by type: 1, 1.0 and
    True are equal in Python, as are the lists [True] and [1]; a string and
    a list of that one string are not the same attribute either. (Spans as
    protocol/tracing.py hands them over: their attributes a plain dict.)"""
    resource, context = Resource.create({"service.name": "web"}), trace.SpanContext(1, 2, False)
    spans = [ReadableSpan("s", context, resource=resource, attributes={"k": value}, start_time=1, end_time=2)
             for value in (1, 1.0, True, "a", ["a"], [True], [1], ("a",), 1, True, ["a"], "a", [1.0], [True])]
    assert ExportTraceServiceRequest.FromString(otlp.encode(spans)) == encode_spans(spans)
