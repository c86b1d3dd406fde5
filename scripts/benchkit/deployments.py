"""9. One model on several servers: requests per second with one, two and
four upstream servers of fixed capacity behind one model name, and a server
killed under load.

Each server is the benchmark's upstream with `--capacity`: it answers a few
requests at once and makes the rest wait, as a GPU box does, so one server's
requests per second are its capacity over a reply's time. Each deployment
is registered with `max_concurrent` equal to that capacity. Clients keep a
fixed number of requests open for a fixed time; requests per second is
replies completed over that time.

The kill: two servers, the same load, and one of them killed (SIGKILL) a
third of the way in. A request is *failed* if it got no reply (an error
status, or an error before its first token): the target is none. Requests
that were streaming from the killed server when it died end with an in-band
error after their first tokens (*cut*): tokens are never replayed, so those
are counted apart.
"""
from __future__ import annotations

import asyncio
import time
from contextlib import ExitStack

from scripts.benchkit.client import StreamResult, stream
from scripts.benchkit.sharing import _Stack
from scripts.benchkit.stats import percentile
from scripts.embedded_redis import free_port
from scripts.processes import Process, start_fake_upstream

SERVERS = (1, 2, 4)
CAPACITY = 4  # requests a server answers at once
TOKENS, RATE = 16, 100  # a reply: 16 tokens at 100 tokens/s, 0.16 s
WORKER = [(100, "upstream-completion,upstream", "gevent")]


def _registry(ports: list[int]) -> str:
    tables = []
    for count in SERVERS:
        listed = ", ".join(f'{{ base_url = "http://127.0.0.1:{p}/v1", max_concurrent = {CAPACITY} }}'
                           for p in ports[:count])
        tables.append(f'[models."x{count}"]\nbackend = "openai"\nupstream_model = "paced"\ncontext_length = 8192\n'
                      f"cooldown = 1\ndeployments = [{listed}]\n")
    return "\n".join(tables)


async def _load(port: int, model: str, clients: int, seconds: float, during=None) -> list[StreamResult]:
    """`clients` requests open at a time for `seconds`; `during` (a
    coroutine function) runs beside them."""
    results: list[StreamResult] = []
    deadline = time.monotonic() + seconds

    async def client(n: int) -> None:
        while time.monotonic() < deadline:
            body = {"model": model, "stream": True, "messages": [{"role": "user", "content": f"{n} {len(results)}"}]}
            results.append(await stream(port, "/v1/chat/completions", body))
    await asyncio.gather(*(client(n) for n in range(clients)), *([during()] if during else []))
    return results


def _count(results: list[StreamResult], seconds: float) -> dict:
    ok = [r for r in results if r.error is None and r.status == 200]
    cut = [r for r in results if r.error is not None and r.ttft is not None]
    return {"requests": len(results), "ok": len(ok), "cut": len(cut), "failed": len(results) - len(ok) - len(cut),
            "requests_per_second": round(len(ok) / seconds, 1),
            "example_failure": next((r.error for r in results if r.error is not None and r.ttft is None), None)}


def _pooled(runs: list[dict]) -> dict:
    """A server count's rounds: counts summed, requests/s the median round's (and every round's)."""
    rates = [r["requests_per_second"] for r in runs]
    pooled = {name: sum(r[name] for r in runs) for name in ("requests", "ok", "cut", "failed")}
    return pooled | {"requests_per_second": percentile(rates, 0.5), "rps_rounds": rates,
                     "example_failure": next((r["example_failure"] for r in runs if r["example_failure"]), None)}


def measure(seconds: float, clients: int, log=print, rounds: int = 3) -> dict:
    ports = [free_port() for _ in range(max(SERVERS))]
    with ExitStack() as stack:
        servers: list[Process] = []
        for p in ports:
            servers.append(start_fake_upstream(p, TOKENS, RATE, CAPACITY))
            stack.callback(servers[-1].stop)
        board = stack.enter_context(_Stack(_registry(ports), WORKER, SWITCHBOARD_MAX_CONCURRENT="100000",
                                           SWITCHBOARD_REQUESTS_PER_MINUTE="10000000"))
        asyncio.run(_load(board.port, "x1", clients, 1.0))  # warm-up
        runs: dict[str, list[dict]] = {str(count): [] for count in SERVERS}
        for round_ in range(rounds):  # the server counts in turns
            for count in SERVERS:
                log(f"9. {count} server(s), round {round_ + 1}")
                started = time.monotonic()  # (until the last reply: the requests open at the deadline end after)
                found = asyncio.run(_load(board.port, f"x{count}", clients, seconds))
                runs[str(count)].append(_count(found, time.monotonic() - started))
        rows = {count: _pooled(found) for count, found in runs.items()}

        async def kill_one() -> None:
            await asyncio.sleep(seconds / 3)
            servers[1].stop(sig=9)
        log("9. a server killed under load")
        killed = _count(asyncio.run(_load(board.port, "x2", clients, seconds, kill_one)), seconds)
    return {"rows": rows, "kill": killed, "one_best_rps": CAPACITY / (TOKENS / RATE), "setup": (
        f"Servers of fixed capacity: each answers {CAPACITY} requests at once, a reply is {TOKENS} tokens at "
        f"{RATE:g} tokens/s (its best: {CAPACITY / (TOKENS / RATE):.0f} requests/s). Each is a deployment with "
        f"max_concurrent = {CAPACITY}. {clients} clients keep a request open each for {seconds:g} s, {rounds} "
        "rounds of the server counts in turns; requests/s counts replies completed over the time until the last "
        "one (the median round's). "
        "The kill: two servers, one killed with SIGKILL a third of the way in.")}
