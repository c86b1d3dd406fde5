"""12. What tracing costs: the same Switchboard with tracing off and on
(exporting every span over OTLP/HTTP to a receiver started here, through
the SDK's batch processor; and keeping one trace in ten, the sampler an
office would set), and with `before` (another source tree, e.g. a
git worktree of the commit before tracing existed, or of an older tracing:
then its tracing on too) as it was; side by side in one run.

Each stack: one web process and a gevent worker whose model is an upstream
(the benchmark's own fake OpenAI server, `instant`), so a request passes
every span: the web's, the queue's, the job's and the upstream call's. Two
requests (WORKLOADS): a short chat and a Claude Code turn. Per stack and
request: the time at one client (p50, p90) and at 16 clients (p50), and
the web and worker processes' CPU time per request.

A machine like ours drifts by 10-20% between rounds a few seconds apart,
more than the 5% to be resolved. So two stacks are compared by measuring
them at the same moments: every client sends its requests to the two in
turn (in a new random order each turn), and a cost is the median over the
rounds of their ratio. Two at a time, not all at once: taking turns among
a dozen processes on 2 cores keeps every cache cold, which doubled every
stack's CPU per request and grew the costs with the code a request touches.
A second stack identical to "off" ("off, again") shows what the
measurement itself spreads. Every round starts its stacks anew: one
process of a stack runs a few percent faster or slower than its twin for
its whole life (its memory's layout, its place on the machine), which
pairing alone would keep in every round.
"""
from __future__ import annotations

import asyncio
import json
import random
import tempfile
import threading
import time
from contextlib import ExitStack
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import psutil

from scripts.embedded_redis import EmbeddedRedis, free_port
from scripts.processes import ROOT, commit_of, ready_together, stack_env, start_fake_upstream, start_web, start_worker
from scripts.benchkit.stats import percentile

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


async def _timed(client: httpx.AsyncClient, base: str, request: tuple[str, dict]) -> float:
    path, body = request
    started = time.perf_counter()
    async with client.stream("POST", f"{base}{path}", json=body) as reply:
        async for _ in reply.aiter_raw():
            pass
        assert reply.status_code == 200, reply.status_code
    return time.perf_counter() - started


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
    trees = ([("before", before, {})] if before else []) + [("off", ROOT, {}), ("off, again", ROOT, {}), (
        "on", ROOT, on), ("on, 1 in 10", ROOT, on | {"OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
                                                     "OTEL_TRACES_SAMPLER_ARG": "0.1"})]
    if before and (before / "protocol" / "tracing.py").exists():  # a tree that traced already: its tracing too
        trees.append(("before, on", before, on))
    with ExitStack() as exit:
        exit.callback(sink.close)
        exit.callback(start_fake_upstream(upstream_port, tokens=32).stop)
        measured = compare(trees, PAIRS, WORKLOADS, f"http://127.0.0.1:{upstream_port}", (requests, rounds),
                           lambda r: log(f"tracing: round {r} of {rounds}"))
    return {"requests": requests, "rounds": rounds, "before": commit_of(before) if before else None,
            "exported_bytes": sink.bytes, "exports": sink.exports, **measured}


def compare(trees: list, pairs: tuple, workloads: dict, upstream: str, counts: tuple[int, int],
            done=lambda round_: None) -> dict:
    """Stacks (name, source tree, environment) on the upstream measured in `pairs`, each pair at the same
    moments, every round on new processes: each stack's summary and each pair's costs, per workload.
    `counts`: requests per client and pair, and rounds."""
    requests, rounds = counts
    names = [name for name, _, _ in trees]
    pairs = [(new, old) for new, old in pairs if new in names and old in names]
    measured = {w: {f"{new} vs {old}": {name: {"one": [], "one_p50": [], "loaded": [], "loaded_p50": [],
                                               "cpu_ms": []} for name in (new, old)} for new, old in pairs}
                for w in workloads}
    for round_ in range(rounds):
        with ExitStack() as these:  # new processes every round: a process's own speed differs by a few %
            stacks = {name: _stack(these, name, tree, upstream, env) for name, tree, env in trees}
            ready_together([p for s in stacks.values() for p in s["processes"]])
            for workload in workloads:
                request = workloads[workload]
                asyncio.run(_interleaved(list(stacks.values()), 4, 40, request, random.Random(0)))  # warm-up
                # (the pairs in a new order every round: a stack in several pairs has served more
                # requests by its later ones, and its partner there meets it warmer)
                for new, old in random.Random(round_).sample(pairs, len(pairs)):
                    _round([stacks[new], stacks[old]], requests, measured[workload][f"{new} vs {old}"],
                           request, random.Random(round_))
            for process in (p for s in stacks.values() for p in s["processes"]):
                process.begin_stop()  # all at once; leaving the block waits for each
        done(round_ + 1)
    return {"workloads": {w: _summaries(by_pair) for w, by_pair in measured.items()},
            "costs": {w: {pair: _costs(*pair.split(" vs "), by_stack) for pair, by_stack in by_pair.items()}
                      for w, by_pair in measured.items()}}


async def _interleaved(stacks: list[dict], clients: int, each: int, request: tuple, order: random.Random) -> dict:
    """`each` requests to every stack from `clients` lanes; a lane sends its
    requests to the stacks in turn, in a new random order every turn."""
    times: dict = {s["name"]: [] for s in stacks}
    turns = [[order.sample(stacks, len(stacks)) for _ in range(each // clients)] for _ in range(clients)]

    async def lane(client: httpx.AsyncClient, mine: list) -> None:
        for turn in mine:
            for stack in turn:
                times[stack["name"]].append(await _timed(client, stack["base"], request))
    # (idle connections dropped before gunicorn's keep-alive of 2 s would close one under a new request)
    limits = httpx.Limits(max_connections=clients * len(stacks), keepalive_expiry=1.0)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:
        await asyncio.gather(*(lane(client, mine) for mine in turns))
    return times


def _round(stacks: list[dict], requests: int, into: dict, request: tuple, order: random.Random) -> None:
    """One client, then 16, each taking turns over the two stacks; and each
    stack's CPU over both."""
    cpu = {s["name"]: _cpu(s) for s in stacks}
    one = asyncio.run(_interleaved(stacks, 1, requests, request, order))
    loaded = asyncio.run(_interleaved(stacks, 16, requests * 4, request, order))
    for stack in stacks:
        name, mine = stack["name"], into[stack["name"]]
        mine["one"] += one[name]
        mine["one_p50"].append(percentile(one[name], 0.5))
        mine["loaded"] += loaded[name]
        mine["loaded_p50"].append(percentile(loaded[name], 0.5))
        mine["cpu_ms"].append((_cpu(stack) - cpu[name]) * 1000 / (len(one[name]) + len(loaded[name])))


def _summaries(by_pair: dict) -> dict:
    """Each stack's measures over every pair it was measured in."""
    merged: dict = {}
    for by_stack in by_pair.values():
        for name, measured in by_stack.items():
            into = merged.setdefault(name, {key: [] for key in measured})
            for key, values in measured.items():
                into[key] += values
    return {name: _summary(measured) for name, measured in merged.items()}


def _summary(measured: dict) -> dict:
    return {"one_client_ms_p50": round(percentile(measured["one"], 0.5) * 1000, 2),
            "one_client_ms_p90": round(percentile(measured["one"], 0.9) * 1000, 2),
            "loaded_ms_p50": round(percentile(measured["loaded"], 0.5) * 1000, 2),
            "cpu_ms_per_request": round(percentile(measured["cpu_ms"], 0.5), 3),
            "cpu_ms_rounds": [round(v, 3) for v in measured["cpu_ms"]]}


PAIRS = (("on", "off"), ("on, 1 in 10", "off"), ("off", "before"), ("on", "before, on"), ("off, again", "off"))
MEASURES = {"one_client_p50": "one_p50", "loaded_p50": "loaded_p50", "cpu": "cpu_ms"}


def _costs(new: str, old: str, stacks: dict) -> dict:
    """What `new` costs over `old`, measured together, for each measure: the
    median of the rounds' ratios. ("off, again" against "off": the same
    stack twice, what the measurement itself spreads.)"""
    costs = {}
    for name, key in MEASURES.items():
        ratios = sorted(n / o - 1 for n, o in zip(stacks[new][key], stacks[old][key]))
        costs[name] = {"median": round(percentile(ratios, 0.5), 4), "rounds": [round(r, 4) for r in ratios]}
    return costs
