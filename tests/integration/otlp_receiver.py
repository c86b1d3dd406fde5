"""A real OTLP/HTTP trace receiver for the tests: it accepts what the
OpenTelemetry exporter POSTs to /v1/traces (protobuf, gzip or not), keeps
each body's bytes as sent, and decodes the spans with opentelemetry-proto."""
from __future__ import annotations

import gzip
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest, ExportTraceServiceResponse,
)


class OtlpReceiver:
    def __init__(self):
        self.bodies: list[bytes] = []  # as received, before any decompression
        self.spans: list[dict] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                body = gzip.decompress(raw) if self.headers.get("Content-Encoding") == "gzip" else raw
                receiver._keep(raw, body, self.path)
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def _keep(self, raw: bytes, body: bytes, path: str) -> None:
        request = ExportTraceServiceRequest.FromString(body)
        with self._lock:
            self.bodies += [raw, body]
            if path != "/v1/traces":
                return
            for resource_spans in request.resource_spans:
                service = next((a.value.string_value for a in resource_spans.resource.attributes
                                if a.key == "service.name"), "")
                for scope in resource_spans.scope_spans:
                    self.spans += [span_dict(service, span) for span in scope.spans]

    def snapshot(self) -> list[dict]:
        with self._lock:
            return list(self.spans)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def span_dict(service: str, span) -> dict:
    return {"service": service, "name": span.name, "kind": span.kind, "trace_id": span.trace_id.hex(),
            "span_id": span.span_id.hex(), "parent_id": span.parent_span_id.hex(),
            "status": span.status.code, "start": span.start_time_unix_nano, "end": span.end_time_unix_nano,
            "attributes": {a.key: _value(a.value) for a in span.attributes}}


def _value(value):
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None
