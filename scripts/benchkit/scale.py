"""8. Scaling: web processes x upstream workers, up to and past capacity.

For each configuration (N gunicorn gevent web processes + M Celery gevent
upstream workers) closed-loop clients stream the `instant` upstream's
32-token replies at 1, 16, 64 and 256 at a time: each client sends its next
request when its previous one ended. A level runs for a warm-up, then a
measured window; requests that end in the window are counted, and the
processes' CPU time (from /proc, every process of each group) is read at the
window's edges, so CPU per request is what the server spent on the requests
of the window, whatever the client did.

With `before` (another source tree, e.g. a git worktree of an older commit)
the same configuration of that tree runs beside this one, each on its own
Redis database, and the two take turns at every level with the direct way:
before and after are measured side by side, in one run, on one machine.
"""
from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from scripts.benchkit import profile
from scripts.benchkit.client import StreamResult, stream
from scripts.benchkit.overhead import check
from scripts.benchkit.stats import summary
from scripts.embedded_redis import EmbeddedRedis, free_port
from scripts.benchkit.stack import LIMITS
from scripts.processes import ROOT, Process, stack_env, start_web, start_worker, wait_http_ready, wait_worker_ready

PATH = "/v1/chat/completions"
LEVELS = (1, 16, 64, 256)
TICKS = os.sysconf("SC_CLK_TCK")
# A tree older than the change hides the libraries the change added, which
# redis-py would otherwise pick up by itself (hiredis): see hide/.
HIDE = Path(__file__).with_name("hide")


@dataclass(frozen=True)
class ScaleSizes:
    configs: tuple[tuple[int, int], ...] = ((1, 1), (2, 2))
    levels: tuple[int, ...] = LEVELS
    warmup: float = 3.0
    window: float = 4.0
    # Each level's ways take turns this many times (a window each), and each
    # way's windows are added up: on a VM whose speed swings from minute to
    # minute, a slow spell is shared out instead of landing on one way. Short
    # turns share it out more evenly: with 2 turns of 8 s, two runs of the same
    # trees on one VM read 0.40x and 0.54x (docs/benchmarks-notes.md).
    rounds: int = 4
    slots: int = 100  # greenlets per upstream worker (the Procfile's default)
    tokens: int = 32
    profile_seconds: float = 4.0
    profile_rounds: int = 6  # the trees' profiles take turns too, profile_seconds each


def cpu_seconds(pids: list[int]) -> float:
    """User plus system CPU of the processes, all threads."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / TICKS


def process_tree(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        try:
            todo += [int(c) for c in Path(f"/proc/{current}/task/{current}/children").read_text().split()]
        except FileNotFoundError:
            pass
    return found


@dataclass
class Server:
    """One tree's configuration, running: where to reach it, what to measure."""
    label: str
    port: int
    web: Process
    workers: list[Process] = field(default_factory=list)

    def cpu(self) -> dict[str, float]:
        return {"web": cpu_seconds(process_tree(self.web.popen.pid)),
                "worker": cpu_seconds([p for w in self.workers for p in process_tree(w.popen.pid)])}


def registry_text(upstream_port: int) -> str:
    return (f'[models."up-instant"]\nbackend = "openai"\npool = "upstream"\n'
            f'base_url = "http://127.0.0.1:{upstream_port}/v1"\nupstream_model = "instant"\n'
            f'context_length = 8192\nretries = 0\n')


def start_server(stack: ExitStack, label: str, tree: Path, redis_url: str, registry: Path, webs: int,
                 workers: int, slots: int) -> Server:
    # The admission limits are opened (capacity is measured, not refusal); the
    # keep-alive stays at its default, as deployed.
    limits = {name: value for name, value in LIMITS.items() if name != "SWITCHBOARD_KEEPALIVE"}
    extra = {"SWITCHBOARD_MODELS": str(registry), **limits}
    env = stack_env(redis_url, **extra)
    if tree != ROOT:
        env["PYTHONPATH"] = os.pathsep.join([str(HIDE), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    started = [start_worker(env, slots, "upstream-completion,upstream", "gevent", wait=False, cwd=tree)
               for _ in range(workers)]
    for process in started:
        stack.callback(process.stop)
    web, base = start_web(env, ("--worker-connections", "4000"), wait=False, processes=webs, cwd=tree)
    stack.callback(web.stop)
    for process in started:
        wait_worker_ready(process)
    wait_http_ready(web, f"{base}/api/version")
    return Server(label, int(base.rsplit(":", 1)[1]), web, started)


async def closed_loop(port: int, model: str, concurrency: int, sizes: ScaleSizes,
                      on_window: Callable[[str], None]) -> tuple[list[StreamResult], float]:
    """`concurrency` clients back to back for warm-up + window; the results
    that ended inside the window, and its length."""
    body = {"model": model, "stream": True, "messages": [{"role": "user", "content": "Say something."}],
            "max_tokens": sizes.tokens, "stream_options": {"include_usage": True}}
    start = time.perf_counter()
    opens, closes = start + sizes.warmup, start + sizes.warmup + sizes.window
    counted: list[StreamResult] = []

    async def client() -> None:
        while time.perf_counter() < closes:
            result = await stream(port, PATH, body)
            if opens <= time.perf_counter() <= closes:
                counted.append(result)

    async def edges() -> None:
        await asyncio.sleep(max(0.0, opens - time.perf_counter()))
        on_window("open")
        await asyncio.sleep(max(0.0, closes - time.perf_counter()))
        on_window("close")

    await asyncio.gather(edges(), *(client() for _ in range(concurrency)))
    return counted, sizes.window


def level_row(way: str, concurrency: int, results: list[StreamResult], seconds: float, tokens: int,
              cpu: dict[str, float] | None) -> dict:
    failures = [why for why in (check(r, tokens) for r in results) if why]
    good = [r for r in results if check(r, tokens) is None]
    row = {"way": way, "concurrency": concurrency, "requests": len(results), "failures": len(failures),
           "first_failure": failures[0] if failures else None, "rps": len(good) / seconds,
           "ttft": summary([r.ttft for r in good])}
    if cpu is not None and good:
        row["cpu_ms_per_request"] = {name: used * 1000 / len(good) for name, used in cpu.items()}
    return row


@dataclass
class Window:
    """What one way measured at one level, over one or more windows."""
    results: list[StreamResult] = field(default_factory=list)
    seconds: float = 0.0
    cpu: dict[str, float] | None = None

    def add(self, results: list[StreamResult], seconds: float, cpu: dict[str, float] | None) -> None:
        self.results += results
        self.seconds += seconds
        if cpu is not None:
            self.cpu = {name: (self.cpu or {}).get(name, 0.0) + used for name, used in cpu.items()}


async def measure_window(port: int, model: str, concurrency: int, sizes: ScaleSizes, server: Server | None,
                         into: Window) -> None:
    marks: dict[str, dict[str, float]] = {}

    def on_window(edge: str) -> None:
        if server is not None:
            marks[edge] = server.cpu()
    results, seconds = await closed_loop(port, model, concurrency, sizes, on_window)
    cpu = {name: marks["close"][name] - marks["open"][name] for name in marks["open"]} if server else None
    into.add(results, seconds, cpu)


def profile_servers(servers: list[Server], seconds: float, rounds: int) -> dict:
    """py-spy at one request at a time, as section 1's profile, per tree: the
    trees take turns, `seconds` each, `rounds` times, as the levels' ways do."""
    ways = {server.label: ({"web": process_tree(server.web.popen.pid)[1],
                            "upstream worker": server.workers[0].popen.pid}, server.port) for server in servers}
    return profile.profile_in_turns(ways, seconds, max(rounds, 1))


def run_config(webs: int, workers: int, sizes: ScaleSizes, redis: EmbeddedRedis, upstream_port: int,
               before: Path | None, log) -> dict:
    registry = Path(tempfile.mkdtemp(prefix="switchboard-scale-")) / "models.toml"
    registry.write_text(registry_text(upstream_port))
    trees = [("after", ROOT)] + ([("before", before)] if before else [])
    with ExitStack() as stack:
        servers = [start_server(stack, label, tree, f"{redis.url.rsplit('/', 1)[0]}/{index + 1}", registry, webs,
                                workers, sizes.slots) for index, (label, tree) in enumerate(trees)]
        rows = []
        for concurrency in sizes.levels:
            log(f"8. scale {webs}+{workers}: {concurrency} clients")
            rows += measure_level(concurrency, sizes, upstream_port, servers)
        result = {"webs": webs, "workers": workers, "rows": rows}
        if (webs, workers) == sizes.configs[0] and sizes.profile_seconds:
            log(f"8. scale {webs}+{workers}: profile")
            result["profile"] = profile_servers(servers, sizes.profile_seconds, sizes.profile_rounds)
        return result


def measure_level(concurrency: int, sizes: ScaleSizes, upstream_port: int, servers: list[Server]) -> list[dict]:
    """Direct, then each tree, taking turns `sizes.rounds` times: a row each."""
    ways = [("direct", upstream_port, "instant", None)] + [(s.label, s.port, "up-instant", s) for s in servers]
    windows = {way: Window() for way, *_ in ways}
    for _ in range(max(sizes.rounds, 1)):
        for way, port, model, server in ways:
            asyncio.run(measure_window(port, model, concurrency, sizes, server, windows[way]))
    return [level_row(way, concurrency, w.results, w.seconds, sizes.tokens, w.cpu) for way, w in windows.items()]


def run(sizes: ScaleSizes, before: Path | None, log=print) -> dict:
    with ExitStack() as stack:
        redis = EmbeddedRedis()
        stack.callback(redis.stop)
        upstream_port = free_port()
        upstream = Process("upstream", [
            sys.executable, "-m", "scripts.benchkit.upstream", "--port", str(upstream_port),
            "--tokens", str(sizes.tokens), "--rate", "200"], stack_env(redis.url))
        stack.callback(upstream.stop)
        wait_http_ready(upstream, f"http://127.0.0.1:{upstream_port}/v1/models")
        configs = [run_config(webs, workers, sizes, redis, upstream_port, before, log)
                   for webs, workers in sizes.configs]
    return {"sizes": {**sizes.__dict__, "configs": [list(c) for c in sizes.configs]},
            "before": str(before) if before else None, "configs": configs}
