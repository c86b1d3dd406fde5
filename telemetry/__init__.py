"""What the operator watches, for both processes: traces and metrics.

- tracing.py: OpenTelemetry set-up (off unless OTEL_EXPORTER_OTLP_ENDPOINT is
  set), the spans of a request and of its job, and the trace context a job
  carries across Redis (Job.traceparent)
- otlp.py: the OTLP/HTTP writer of those spans
- metrics.py: the cluster-wide counters and histograms both processes write
  to Redis, read by /metrics

Stands on protocol/ (its keys) and imports no web, worker or queue code.
"""
