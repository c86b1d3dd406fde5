"""The OTLP exporter tracing uses (telemetry/tracing.py): the official
OTLP/HTTP exporter (its endpoint, headers, TLS, compression, timeout and
retries, all from OTEL_EXPORTER_OTLP_*), sending tracing's own spans
written straight into protobuf's wire format here. The exporter's own
encoder builds a protobuf message object for every span, attribute and
value, which cost more than everything else tracing did
(docs/benchmarks-notes.md); the bytes written here are the very bytes it
makes of the same spans (tests/unit/test_otlp.py compares the two).

Imported only when tracing is on (it imports the SDK)."""
from __future__ import annotations

import logging
import struct
import time
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

_logger = logging.getLogger(__name__)
_LEN, _VARINT, _I64, _I32 = 2, 0, 1, 5
_HAS_IS_REMOTE, _IS_REMOTE = 0x100, 0x200  # SpanFlags
_DOUBLE, _FIXED64, _FIXED32 = struct.Struct("<d"), struct.Struct("<Q"), struct.Struct("<I")


def _varint(n: int) -> bytes:
    if n < 0:
        n += 1 << 64  # int64: two's complement in ten bytes
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _key(field: int, wire: int) -> bytes:
    return _KEYS[field, wire]


_KEYS = {(field, wire): _varint(field << 3 | wire) for field in range(1, 17) for wire in (_LEN, _VARINT, _I64, _I32)}
_SMALL = [bytes((n,)) for n in range(128)]


def _bytes(field: int, data: bytes) -> bytes:
    size = len(data)
    return _KEYS[field, _LEN] + (_SMALL[size] if size < 128 else _varint(size)) + data


def _string(field: int, text: str | None) -> bytes:
    return _bytes(field, text.encode()) if text else b""  # proto3: an empty string is not written


def _value(value: Any) -> bytes:
    """An AnyValue's fields."""
    if value is None:
        return b""
    if isinstance(value, bool):
        return _key(2, _VARINT) + _varint(int(value))
    if isinstance(value, str):
        return _bytes(1, value.encode())
    if isinstance(value, int):
        return _key(3, _VARINT) + _varint(value)
    if isinstance(value, float):
        return _key(4, _I64) + _DOUBLE.pack(value)
    if isinstance(value, bytes):
        return _bytes(7, value)
    if isinstance(value, Sequence):
        return _bytes(5, b"".join(_bytes(1, _value(each)) for each in value))
    if isinstance(value, Mapping):
        return _bytes(6, b"".join(_bytes(1, _pair(str(k), v)) for k, v in value.items()))
    raise TypeError(f"Invalid type {type(value).__name__} of an attribute")


def _pair(key: str, value: Any) -> bytes:
    """A KeyValue's fields."""
    return _bytes(1, key.encode()) + _bytes(2, _value(value))


# Bytes that repeat, written once: (field, key, value) -> an attribute (a route, a model, a status);
# (1, key) -> an attribute's key field; (5, name) -> a span's name field.
_written: dict = {}


def _remember(key: tuple, written: bytes) -> bytes:
    if len(_written) >= 4096:  # (what is kept stays bounded)
        _written.clear()
    _written[key] = written
    return written


def _attributes(field: int, attributes: Mapping | None) -> bytes:
    if not attributes:
        return b""
    out = []
    for key, value in attributes.items():
        kind = type(value)
        if kind is int or kind is float:  # (counts and times: seldom the same twice, so written anew)
            name = _written.get((1, key)) or _remember((1, key), _bytes(1, key.encode()))
            number = _key(3, _VARINT) + _varint(value) if kind is int else _key(4, _I64) + _DOUBLE.pack(value)
            out.append(_bytes(field, name + _bytes(2, number)))
            continue
        # (a bool equals no str or tuple; a list is kept as a tuple of its strings: (True,) would equal (1,))
        known = (field, key, value) if kind is str or kind is bool else (field, key, tuple(value)) \
            if kind is list and all(type(each) is str for each in value) else None
        written = _written.get(known) if known else None
        if written is None:
            written = _bytes(field, _pair(key, value))
            if known:
                _remember(known, written)
        out.append(written)
    return b"".join(out)


def _span(span) -> bytes:
    """A tracing.Span's fields (its events and links: none; its status:
    unset, or an error without a description)."""
    return b"".join((
        _TRACE_ID + span.trace_id.to_bytes(16, "big"), _SPAN_ID + span.span_id.to_bytes(8, "big"),
        _string(3, ",".join(f"{k}={v}" for k, v in span.state.items())) if span.state else b"",
        _PARENT_ID + span.parent_id.to_bytes(8, "big") if span.parent_id else b"",
        _name(span.name), _KINDS[span.kind], _START + _FIXED64.pack(span.start), _END + _FIXED64.pack(span.end),
        _attributes(9, span.attributes), _key(10, _VARINT) + _varint(span.dropped) if span.dropped else b"",
        _ERROR if span.error else _UNSET, _FLAGS[span.remote]))


# What every span has, its field's key (and length) written once.
_TRACE_ID, _SPAN_ID, _PARENT_ID = _KEYS[1, _LEN] + b"\x10", _KEYS[2, _LEN] + b"\x08", _KEYS[4, _LEN] + b"\x08"
_KINDS = {kind: _KEYS[6, _VARINT] + _varint(kind + 1) for kind in range(5)}  # (SpanKind's values; OTLP's from 1)
_UNSET, _ERROR = _KEYS[15, _LEN] + b"\x00", _KEYS[15, _LEN] + b"\x02" + _KEYS[3, _VARINT] + b"\x02"  # Status
_START, _END = _KEYS[7, _I64], _KEYS[8, _I64]
_FLAGS = {remote: _KEYS[16, _I32] + _FIXED32.pack(_HAS_IS_REMOTE | (_IS_REMOTE if remote else 0))
          for remote in (False, True)}


def _name(name: str) -> bytes:
    return _written.get((5, name)) or _remember((5, name), _string(5, name))


def _scope(scope) -> bytes:
    return _string(1, scope.name) + _string(2, scope.version) + _attributes(3, scope.attributes)


class Described(NamedTuple):
    """What every span of a process shares, written once: the fields of the
    ResourceSpans (its resource) and of the ScopeSpans (its scope) before
    and after their spans."""
    resource_head: bytes
    resource_tail: bytes
    scope_head: bytes
    scope_tail: bytes

    @classmethod
    def of(cls, resource, scope) -> "Described":
        return cls(_bytes(1, _attributes(1, resource.attributes)), _string(3, resource.schema_url),
                   _bytes(1, _scope(scope)), _string(3, scope.schema_url))


def encode(spans: Sequence, described: Described) -> bytes:
    """An ExportTraceServiceRequest of a process's finished spans."""
    if not spans:
        return b""
    body = b"".join([_bytes(2, _span(span)) for span in spans])
    return _bytes(1, described.resource_head + _bytes(2, described.scope_head + body + described.scope_tail)
                  + described.resource_tail)


# Spans encoded between two yields: the batch processor's thread is a greenlet in a gevent process, and a whole
# batch (512 spans, ~5 ms) at once would hold up every stream of that process for its encoding.
CHUNK = 64


def encode_yielding(spans: Sequence, described: Described) -> bytes:
    """`encode`, CHUNK spans at a time, letting the others run in between
    (requests concatenated are one request: their resource_spans add up)."""
    parts = []
    for start in range(0, len(spans), CHUNK):
        parts.append(encode(spans[start:start + CHUNK], described))
        time.sleep(0)
    return b"".join(parts)


class Exporter(OTLPSpanExporter):
    """The official exporter, sending what `encode` writes of the spans of
    one resource and scope (the process's)."""

    def __init__(self, resource, scope):
        super().__init__()
        self._described = Described.of(resource, scope)

    def export(self, spans: Sequence) -> SpanExportResult:
        if self._shutdown:
            return SpanExportResult.FAILURE
        try:
            data = encode_yielding(spans, self._described)
        except Exception as error:  # noqa: BLE001 (an export must never raise into the batch processor)
            _logger.error("Failed to encode span batch: %s", type(error).__name__)
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS if self._client.export(data).success else SpanExportResult.FAILURE
