"""Where one request's cost goes: Switchboard as `make run` starts it (one web
process, one gevent upstream worker) on a Redis of its own, its model the
benchmark's instant upstream (35 tokens at once); closed-loop clients (1 and
10) send chat requests, streamed and not, for a few seconds each. Per
variant: requests/s and p50; py-spy's samples of the web and worker
processes charged to the library their innermost frame is in
(scripts/benchkit/profile.py), in CPU ms per request; and Redis's own
account (INFO commandstats before and after): each command's calls and
microseconds per request.

    python scripts/request_cost.py [--seconds 8] [--clients 1,10] > cost.json

The findings are written up in docs/benchmarks-notes.md."""
from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts.benchkit.client import stream  # noqa: E402
from scripts.benchkit.profile import RATE, py_spy, summarize  # noqa: E402
from scripts.benchkit.relay import web_worker_pid  # noqa: E402
from scripts.benchkit.stats import percentile  # noqa: E402
from scripts.embedded_redis import EmbeddedRedis, free_port  # noqa: E402
from scripts.processes import ready_together, stack_env, start_fake_upstream, start_web, start_worker  # noqa: E402

BODY = {"model": "up", "messages": [{"role": "user", "content": "hello, how are you?"}]}


def commandstats(client: redis.Redis) -> dict[str, tuple[int, int]]:
    """Command -> (calls, microseconds) so far; and "round trips": the reads Redis processed (a pipeline's
    commands arrive in one)."""
    reads = int(client.info("stats")["total_reads_processed"])
    return {name.removeprefix("cmdstat_"): (int(v["calls"]), int(v["usec"]))
            for name, v in client.info("commandstats").items()} | {"round trips": (reads, 0)}


async def _closed_loop(port: int, clients: int, seconds: float, streamed: bool) -> list[float]:
    deadline, times = time.monotonic() + seconds, []

    async def lane() -> None:
        while time.monotonic() < deadline:
            result = await stream(port, "/v1/chat/completions", BODY | {"stream": streamed})
            if result.error or result.status != 200:
                raise RuntimeError(result.error or f"status {result.status}")
            times.append(result.total)
    await asyncio.gather(*(lane() for _ in range(clients)))
    return times


def measure(port: int, pids: dict[str, int], client: redis.Redis, clients: int, seconds: float,
            streamed: bool) -> dict:
    folder = Path(tempfile.mkdtemp(prefix="request-cost-"))
    spies = {name: subprocess.Popen([py_spy(), "record", "--nonblocking", "-r", str(RATE), "-d",
                                     str(int(seconds) + 1), "-f", "raw", "-p", str(pid), "-o",
                                     str(folder / f"{name}.txt")], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL) for name, pid in pids.items()}
    time.sleep(0.5)  # py-spy attaches
    before = commandstats(client)
    started = time.monotonic()
    times = asyncio.run(_closed_loop(port, clients, seconds - 0.5, streamed))
    elapsed = time.monotonic() - started
    after = commandstats(client)
    for spy in spies.values():
        spy.wait(60)
    n = len(times)
    per_command = {name: {"calls": round((calls - before.get(name, (0, 0))[0]) / n, 2),
                          "usec": round((usec - before.get(name, (0, 0))[1]) / n, 1)}
                   for name, (calls, usec) in after.items() if calls > before.get(name, (0, 0))[0]}
    trips = per_command.pop("round trips", {}).get("calls")
    return {"clients": clients, "streamed": streamed, "requests": n, "rps": round(n / elapsed, 1),
            "p50_ms": round(percentile(times, 0.5) * 1000, 2), "p99_ms": round(percentile(times, 0.99) * 1000, 2),
            "processes": {name: summarize(folder / f"{name}.txt", n) for name in pids},
            "redis_per_request": dict(sorted(per_command.items(), key=lambda kv: -kv[1]["usec"])),
            "redis_round_trips_per_request": trips,
            "redis_calls_per_request": round(sum(c["calls"] for c in per_command.values()), 1),
            "redis_usec_per_request": round(sum(c["usec"] for c in per_command.values()), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--clients", default="1,10")
    args = parser.parse_args()
    with ExitStack() as exit:
        server = EmbeddedRedis()
        exit.callback(server.stop)
        upstream_port = free_port()
        exit.callback(start_fake_upstream(upstream_port, tokens=35).stop)
        folder = Path(exit.enter_context(tempfile.TemporaryDirectory()))
        (folder / "models.toml").write_text(f'[models."up"]\nbackend = "openai"\nbase_url = '
                                            f'"http://127.0.0.1:{upstream_port}/v1"\nupstream_model = "instant"\n'
                                            "context_length = 8192\n")
        env = stack_env(server.url, SWITCHBOARD_MODELS=str(folder / "models.toml"),
                        SWITCHBOARD_REQUESTS_PER_MINUTE="1000000", SWITCHBOARD_MAX_CONCURRENT="64")
        worker = start_worker(env, 32, "upstream-completion,upstream", "gevent", wait=False)
        exit.callback(worker.stop)
        web, base = start_web(env, wait=False)
        exit.callback(web.stop)
        ready_together([worker, web])
        port = int(base.rsplit(":", 1)[1])
        pids = {"web": web_worker_pid(web.popen.pid), "worker": worker.popen.pid}
        client = redis.Redis.from_url(server.url)
        asyncio.run(_closed_loop(port, 4, 2.0, True))  # warm-up
        results = [measure(port, pids, client, clients, args.seconds, streamed)
                   for clients in (int(c) for c in args.clients.split(",")) for streamed in (False, True)]
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
