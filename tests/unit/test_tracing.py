"""protocol/tracing.py without a collector: off unless an endpoint is set
(and then nothing of the SDK is even imported), the standard switch-off
honoured, and a job's traceparent read back exactly."""
from __future__ import annotations

import subprocess
import sys

from protocol import tracing
from scripts.processes import ROOT


def test_wanted_only_with_an_endpoint_and_not_switched_off():
    assert not tracing.wanted({})
    assert tracing.wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})
    assert tracing.wanted({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"})
    assert not tracing.wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"})


def test_off_imports_nothing_of_the_sdk_and_every_helper_is_a_branch():
    code = ("import sys; from protocol import tracing; tracing.setup('x'); "
            "span = tracing.start_server_span('GET /', {'traceparent': '00-' + 'a' * 32 + '-' + 'b' * 16 + '-01'}, {}); "
            "assert span is None and tracing.traceparent_of(span) == '' and tracing.trace_id_of(span) == ''; "
            "print(any(name.startswith('opentelemetry') for name in sys.modules))")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    ran = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "False"


def test_a_jobs_traceparent_is_read_back_exactly_and_a_bad_one_is_none():
    code = ("from protocol import tracing; tracing.setup('x'); "
            "from opentelemetry import trace; "
            "tp = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'; "
            "parent = trace.get_current_span(tracing._parent(tp)).get_span_context(); "
            "assert (parent.trace_id, parent.span_id, parent.trace_flags.sampled) == "
            "(0x4bf92f3577b34da6a3ce929d0e0e4736, 0x00f067aa0ba902b7, True); "
            "assert [tracing._parent(bad) for bad in ('', '00-xyz-00f067aa0ba902b7-01', "
            "'00-' + '0' * 32 + '-00f067aa0ba902b7-01', '00-4bf92f3577b34da6a3ce929d0e0e4736-short-01')] == [None] * 4; "
            "span = tracing.start_server_span('POST /v1/chat/completions', {'TraceParent': tp}, {}); "
            "assert tracing.traceparent_of(span).split('-')[1] == tp.split('-')[1]; "
            "assert tracing.trace_id_of(span) == tp.split('-')[1]; print('ok')")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
           "OTEL_BSP_SCHEDULE_DELAY": "60000"}
    ran = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0 and ran.stdout.strip() == "ok", ran.stderr
