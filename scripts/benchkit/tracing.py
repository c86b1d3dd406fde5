"""12. What tracing costs: the same Switchboard with tracing off and on
(exporting every span over OTLP/HTTP to a receiver started here, through
the SDK's batch processor; and keeping one trace in ten, the sampler an
office would set), and with `before` (another source tree, e.g. a
git worktree of the commit before tracing existed) as it was; side by side
in one run, taking turns round after round.

Each stack: one web process and a gevent worker whose model is an upstream
(the benchmark's own fake OpenAI server, `instant`), so a request passes
every span: the web's, the queue's, the job's and the upstream call's. Two
requests (WORKLOADS): a short chat and a Claude Code turn. Per stack and
request: the time at one client (p50, p90), requests per second at 16
clients, and the web and worker processes' CPU time per request (what
tracing adds to the hot paths, whatever the machine's noise).
"""
from __future__ import annotations

import asyncio
import json
import tempfile
import threading
import time
from contextlib import ExitStack
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import psutil

from scripts.embedded_redis import EmbeddedRedis, free_port
from scripts.processes import ROOT, ready_together, stack_env, start_fake_upstream, start_web, start_worker
from scripts.benchkit.stats import percentile, run_concurrently

FIXTURE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "claude-code-messages-request.json"
# Two requests: the cheapest (a short chat: what tracing adds shows most) and an agent's turn (Claude
# Code's own first request, its system prompt and 24 tools: the office's usual request).
WORKLOADS = {
    "chat": ("/v1/chat/completions", {"model": "up", "stream": True,
                                      "messages": [{"role": "user", "content": "hello, how are you?"}]}),
    "claude code turn": ("/v1/messages", json.loads(FIXTURE.read_text())["body"] | {"model": "up"}),
}


class Sink:
    """An OTLP/HTTP endpoint that takes every export (and counts its bytes)."""

    def __init__(self):
        sink = self
        self.exports = self.bytes = 0

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                sink.bytes += len(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                sink.exports += 1
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _stack(exit: ExitStack, name: str, tree: Path, upstream: str, env: dict) -> dict:
    folder = Path(exit.enter_context(tempfile.TemporaryDirectory()))
    (folder / "models.toml").write_text(f'[models."up"]\nbackend = "openai"\nbase_url = "{upstream}/v1"\n'
                                        'upstream_model = "instant"\ncontext_length = 8192\n')
    redis = EmbeddedRedis()
    exit.callback(redis.stop)
    full_env = stack_env(redis.url, SWITCHBOARD_MODELS=str(folder / "models.toml"),  # one person, many requests
                         SWITCHBOARD_REQUESTS_PER_MINUTE="1000000", SWITCHBOARD_MAX_CONCURRENT="64", **env)
    worker = start_worker(full_env, 32, "upstream-completion,upstream", "gevent", wait=False, cwd=tree)
    exit.callback(worker.stop)
    web, base = start_web(full_env, wait=False, cwd=tree)
    exit.callback(web.stop)
    return {"name": name, "base": base, "processes": [web, worker]}


async def _timed(client: httpx.AsyncClient, base: str, workload: str) -> float:
    path, body = WORKLOADS[workload]
    started = time.perf_counter()
    async with client.stream("POST", f"{base}{path}", json=body) as reply:
        async for _ in reply.aiter_raw():
            pass
        assert reply.status_code == 200, reply.status_code
    return time.perf_counter() - started


async def _load(base: str, clients: int, total: int, workload: str = "chat") -> list[float]:
    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=clients)) as client:
        return await run_concurrently(lambda: _timed(client, base, workload), clients, total)


def _cpu(stack: dict) -> float:
    """The stack's processes' CPU seconds so far (with their children)."""
    total = 0.0
    for process in stack["processes"]:
        root = psutil.Process(process.popen.pid)
        for each in [root, *root.children(recursive=True)]:
            times = each.cpu_times()
            total += times.user + times.system
    return total


def measure(requests: int, rounds: int, before: Path | None, log=print) -> dict:
    sink, upstream_port = Sink(), free_port()
    on = {"OTEL_EXPORTER_OTLP_ENDPOINT": sink.url, "OTEL_SERVICE_NAME": "bench"}
    trees = ([("before", before, {})] if before else []) + [("off", ROOT, {}), ("on", ROOT, on), (
        "on, 1 in 10", ROOT, on | {"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.1"})]
    with ExitStack() as exit:
        exit.callback(sink.close)
        exit.callback(start_fake_upstream(upstream_port, tokens=32).stop)
        upstream = f"http://127.0.0.1:{upstream_port}"
        stacks = [_stack(exit, name, tree, upstream, env) for name, tree, env in trees]
        ready_together([p for s in stacks for p in s["processes"]])
        measured = {w: {s["name"]: {"one": [], "rps": [], "cpu_ms": []} for s in stacks} for w in WORKLOADS}
        for stack in stacks:  # warm-up
            for workload in WORKLOADS:
                asyncio.run(_load(stack["base"], 4, 40, workload))
        for round_ in range(rounds):
            for workload in WORKLOADS:
                for stack in (stacks if round_ % 2 == 0 else stacks[::-1]):
                    _round(stack, requests, measured[workload][stack["name"]], workload)
            log(f"tracing: round {round_ + 1} of {rounds}")
    return {"requests": requests, "rounds": rounds, "before": str(before) if before else None,
            "exported_bytes": sink.bytes, "exports": sink.exports,
            "workloads": {w: {name: _summary(m) for name, m in stacks_.items()} for w, stacks_ in measured.items()}}


def _round(stack: dict, requests: int, into: dict, workload: str) -> None:
    cpu = _cpu(stack)
    into["one"] += asyncio.run(_load(stack["base"], 1, requests, workload))
    started = time.perf_counter()
    asyncio.run(_load(stack["base"], 16, requests * 4, workload))
    into["rps"].append(requests * 4 / (time.perf_counter() - started))
    into["cpu_ms"].append((_cpu(stack) - cpu) * 1000 / (requests * 5))


def _summary(measured: dict) -> dict:
    one = sorted(measured["one"])
    return {"one_client_ms_p50": round(percentile(one, 0.5) * 1000, 2),
            "one_client_ms_p90": round(percentile(one, 0.9) * 1000, 2),
            "rps_16_clients": round(sorted(measured["rps"])[len(measured["rps"]) // 2], 1),
            "cpu_ms_per_request": round(sorted(measured["cpu_ms"])[len(measured["cpu_ms"]) // 2], 3),
            "cpu_ms_rounds": [round(v, 3) for v in measured["cpu_ms"]]}
