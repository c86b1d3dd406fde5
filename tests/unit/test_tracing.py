"""telemetry/tracing.py without a collector: off unless an endpoint is set
(and then nothing of the SDK is even imported), the standard switch-off
honoured, and a job's traceparent read back exactly."""
from __future__ import annotations

import subprocess
import sys

import pytest

from telemetry import tracing
from scripts.processes import ROOT


def test_wanted_only_with_an_endpoint_and_not_switched_off():
    assert not tracing.wanted({})
    assert tracing.wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})
    assert tracing.wanted({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"})
    assert not tracing.wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"})


def test_off_imports_nothing_of_the_sdk_and_every_helper_is_a_branch():
    code = ("import sys; from telemetry import tracing; tracing.setup('x'); "
            "span = tracing.start_server_span('GET /', {'traceparent': '00-' + 'a' * 32 + '-' + 'b' * 16 + '-01'}, {}); "
            "assert span is None and tracing.traceparent_of(span) == '' and tracing.trace_id_of(span) == ''; "
            "print(any(name.startswith('opentelemetry') for name in sys.modules))")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    ran = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "False"


def test_a_jobs_traceparent_is_read_back_exactly_and_a_bad_one_is_none():
    code = ("from telemetry import tracing; tracing.setup('x'); "
            "tp = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'; "
            "parent = tracing._parent(tp); "
            "assert (parent.trace_id, parent.span_id, parent.flags) == "
            "(0x4bf92f3577b34da6a3ce929d0e0e4736, 0x00f067aa0ba902b7, 1); "
            "assert [tracing._parent(bad) for bad in ('', '00-xyz-00f067aa0ba902b7-01', "
            "'00-' + '0' * 32 + '-00f067aa0ba902b7-01', '00-4bf92f3577b34da6a3ce929d0e0e4736-short-01')] == [None] * 4; "
            "from werkzeug.datastructures import Headers; "
            "span = tracing.start_server_span('POST /v1/chat/completions', Headers({'TraceParent': tp}), {}); "
            "assert tracing.traceparent_of(span).split('-')[1] == tp.split('-')[1]; "
            "assert tracing.trace_id_of(span) == tp.split('-')[1]; "
            "from werkzeug.datastructures import EnvironHeaders; "
            "span = tracing.start_server_span('POST /', EnvironHeaders({'HTTP_TRACEPARENT': tp}), {}); "
            "assert tracing.trace_id_of(span) == tp.split('-')[1]; print('ok')")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
           "OTEL_BSP_SCHEDULE_DELAY": "60000"}
    ran = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0 and ran.stdout.strip() == "ok", ran.stderr


# What a worker does with a job's trace, run in a process of its own (tracing is set up once per process),
# exporting to a real OTLP receiver here.
_JOB = """
import os, time
from telemetry import tracing
tracing.setup("worker")
sampled = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
with tracing.job_span(sampled, "chat up", {"gen_ai.request.model": "up", "gen_ai.request.max_tokens": None},
                      time.time() - 0.25) as job:
    assert tracing.current() is job
    with tracing.client_span("POST", "10.0.0.5:8080", "/v1/chat/completions") as call:
        assert call.headers["traceparent"].split("-")[1] == "4bf92f3577b34da6a3ce929d0e0e4736"
        tracing.annotate(call.span, {"http.response.status_code": 502})
        tracing.fail(call.span, "502")
    tracing.record_span("execute_tool read_file", {"gen_ai.tool.name": "read_file"}, 0.5, "timeout")
    tracing.annotate(job, {"gen_ai.usage.output_tokens": 7, "switchboard.note": "x" * 100})
assert tracing.current() is None
with tracing.job_span("00-4bf92f3577b34da6a3ce929d0e0e4737-00f067aa0ba902b7-00", "chat unsampled", {}, 0) as job:
    tracing.record_span("execute_tool never", {}, 0.1)
span = tracing.start_server_span("POST /v1/messages", {}, {"http.route": "/v1/messages"})
kept = os.environ.get("OTEL_TRACES_SAMPLER") != "always_off"
assert len(tracing.trace_id_of(span)) == (32 if kept else 0) and int(tracing.traceparent_of(span)[-2:], 16) & 1 == kept
tracing.end(span, "500")
from opentelemetry import trace
trace.get_tracer_provider().force_flush()
print("ok")
"""


# An SDK whose batch processor keeps its queue under another name (what an upgrade may do to a private
# attribute): tracing must notice at set-up, say so once, and send the same spans the SDK's own way.
_RENAMED_SDK = """
from opentelemetry.sdk.trace import export
class Renamed(export.BatchSpanProcessor):
    def __init__(self, exporter):
        super().__init__(exporter)
        self._queue_elsewhere = self.__dict__.pop("_batch_processor")
    def __getattr__(self, name):
        if name == "_batch_processor" and "_queue_elsewhere" in self.__dict__:
            import inspect  # the SDK's own methods still find it; tracing's look does not
            caller = inspect.currentframe().f_back.f_globals.get("__name__", "")
            if caller.startswith("opentelemetry."):
                return self._queue_elsewhere
        raise AttributeError(name)
export.BatchSpanProcessor = Renamed
"""


def _run_job(receiver_url: str, prelude: str = "", **env: str) -> str:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "OTEL_EXPORTER_OTLP_ENDPOINT": receiver_url,
           "OTEL_BSP_SCHEDULE_DELAY": "60000", **env}
    ran = subprocess.run([sys.executable, "-c", prelude + _JOB], env=env, capture_output=True, text=True,
                         timeout=60)
    assert ran.returncode == 0 and ran.stdout.strip() == "ok", ran.stderr
    return ran.stderr


@pytest.mark.parametrize("prelude", ["", _RENAMED_SDK], ids=["fast-path", "sdk-without-its-private-queue"])
def test_a_jobs_spans_are_its_queue_its_own_its_calls_and_the_sampler_is_honoured(prelude):
    from tests.integration.otlp_receiver import OtlpReceiver
    receiver = OtlpReceiver()
    try:
        said = _run_job(receiver.url, prelude, OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT="40")
        warned = [line for line in said.splitlines() if "BatchSpanProcessor._batch_processor.emit" in line]
        assert len(warned) == (1 if prelude else 0), said
        spans = {s["name"]: s for s in receiver.snapshot()}
        assert set(spans) == {"queue", "chat up", "POST", "execute_tool read_file", "POST /v1/messages"}
        job, queue, call, tool = spans["chat up"], spans["queue"], spans["POST"], spans["execute_tool read_file"]
        assert job["parent_id"] == queue["parent_id"] == "00f067aa0ba902b7"  # the job's traceparent
        assert call["parent_id"] == tool["parent_id"] == job["span_id"]
        assert {job["trace_id"], call["trace_id"], tool["trace_id"]} == {"4bf92f3577b34da6a3ce929d0e0e4736"}
        assert queue["end"] - queue["start"] >= 250_000_000 and tool["end"] - tool["start"] == 500_000_000
        assert call["kind"] == 3 and call["status"] == 2 and call["attributes"] == {
            "http.request.method": "POST", "server.address": "10.0.0.5:8080", "url.path": "/v1/chat/completions",
            "http.response.status_code": 502, "error.type": "502"}
        assert tool["attributes"]["error.type"] == "timeout" and tool["status"] == 2
        assert job["attributes"] == {"gen_ai.request.model": "up", "gen_ai.usage.output_tokens": 7,
                                     "switchboard.note": "x" * 40}  # None left out; the length limit kept
        server = spans["POST /v1/messages"]
        assert server["parent_id"] == "" and server["kind"] == 2 and server["attributes"]["error.type"] == "500"
        assert "chat unsampled" not in spans and "execute_tool never" not in spans  # its parent was not sampled
        receiver.spans.clear()
        _run_job(receiver.url, prelude, OTEL_TRACES_SAMPLER="always_off")  # a server span's trace goes on, unsampled
    finally:
        receiver.close()
    assert receiver.snapshot() == []


# Under a remote parent, a span is decided without the sampler's call when the sampler is one of the SDK's
# parent-based ones: the decision must be the sampler's own, for every configuration OTEL_TRACES_SAMPLER names.
_DECISIONS = """
import os
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider, sampling
from telemetry import sdk, tracing
tracing.setup("worker")
follows, roots = [], []
for name in ("parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio", "always_on",
             "always_off", "traceidratio"):
    os.environ["OTEL_TRACES_SAMPLER"], os.environ["OTEL_TRACES_SAMPLER_ARG"] = name, "0.5"
    sampler = sampling._get_from_env_or_default()
    shortcuts = sdk.shortcuts(TracerProvider(sampler=sampler))
    follows += [name] if shortcuts[0] else []
    roots += [name] if shortcuts[1] is not None else []
    tracing._sdk = tracing._sdk._replace(sampler=sampler, follows=shortcuts[0], roots=shortcuts[1])
    for _ in range(20):  # new traces (decided here only where the root sampler keeps every one, whatever its id)
        span = tracing._start("POST /v1/messages", None, tracing.SERVER, {"a": 1})
        asked = tracing._sampled("POST /v1/messages", None, tracing.SERVER, {"a": 1})
        assert span.parent_id == 0 and span.state is asked[2] is None
        if shortcuts[1] is not None:
            assert (span.flags, span.attributes) == (asked[1], asked[3]) and asked[1] & 1, name
    for flags in range(4):
        for state in (trace.TraceState(), trace.TraceState([("vendor", "v1")])):
            for trace_id in (0x4bf92f3577b34da6a3ce929d0e0e4736, 0xfff92f3577b34da6a3ce929d0e0e4736):
                parent = tracing.Remote(trace_id, 0x00f067aa0ba902b7, flags, state)
                span = tracing._start("chat up", parent, tracing.INTERNAL, {"a": 1})
                asked = tracing._sampled("chat up", parent, tracing.INTERNAL, {"a": 1})
                assert (span.trace_id, span.flags, span.state) == asked[:3], (name, flags)
                assert span.attributes == (asked[3] if asked[1] & 1 else None)
                assert (span.parent_id, span.remote) == (0x00f067aa0ba902b7, True)
print(follows, roots)
"""


def test_a_span_under_a_remote_parent_is_decided_as_the_sampler_would():
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
           "OTEL_BSP_SCHEDULE_DELAY": "60000"}
    ran = subprocess.run([sys.executable, "-c", _DECISIONS], env=env, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == str(["parentbased_always_on", "parentbased_always_off",
                                      "parentbased_traceidratio"]) + " " + str(["parentbased_always_on"])
