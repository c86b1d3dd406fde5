"""Section 15: a tool call through the MCP gateway against the same call
made directly on the MCP server.

One MCP server over streamable HTTP (the tests' tool server, run as a
process; its `say` tool answers at once), and a Switchboard of one web
process and one MCP pool process on an embedded Redis, keys off. Callers
are the official `mcp` SDK's clients (the stateless 2026-07-28 era, which
both ends speak), one session each, all in one asyncio process: `callers`
of them call `say` back to back for the window, directly on the server,
then through /mcp/tools, in turns, each way starting the rounds in turn.
The added time is the gateway's latency minus the direct call's, per
percentile, the median of the rounds.
"""
from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from scripts.benchkit.stats import percentile
from scripts.embedded_redis import EmbeddedRedis, free_port
from scripts.processes import Process, ROOT, stack_env, start_mcp_pool, start_web, stop_together, wait_http_ready

SETUP = ("The tests' MCP tool server over streamable HTTP (its `say` tool answers at once) and a Switchboard of one "
         "web process and one MCP pool process (keys off), on this machine. Each caller is an official `mcp` SDK "
         "client session (the 2026-07-28 era); callers call `say` back to back for the window, directly on the "
         "server and through `/mcp/tools`, in turns. Added: the gateway's latency minus the direct call's, per "
         "percentile, the median of the rounds.")


async def _calls(url: str, callers: int, warmup: int, seconds: float) -> list[float]:
    """Every call's latency (ms), `callers` sessions calling for `seconds` after `warmup` calls each."""
    async def one(latencies: list[float], deadline_box: list[float]) -> None:
        http = httpx2.AsyncClient(timeout=60)
        async with Client(streamable_http_client(url, http_client=http), mode="2026-07-28") as client:
            for _ in range(warmup):
                await client.call_tool("say", {"text": "hi"})
            await started.wait()
            while time.monotonic() < deadline_box[0]:
                begun = time.perf_counter()
                await client.call_tool("say", {"text": "hi"})
                latencies.append((time.perf_counter() - begun) * 1000)

    latencies: list[float] = []
    started, deadline = asyncio.Event(), [0.0]
    tasks = [asyncio.create_task(one(latencies, deadline)) for _ in range(callers)]
    await asyncio.sleep(0.5 + 0.05 * callers)  # (the sessions open and warm up)
    deadline[0] = time.monotonic() + seconds
    started.set()
    await asyncio.gather(*tasks)
    return latencies


def _summary(latencies: list[float]) -> dict:
    return {"p50": percentile(latencies, 0.5), "p99": percentile(latencies, 0.99), "n": len(latencies)}


class _GatewayStack:
    def __enter__(self) -> tuple[str, str]:
        self._exit = ExitStack()
        redis = EmbeddedRedis()
        self._exit.callback(redis.stop)
        processes: list[Process] = []
        self._exit.callback(lambda: stop_together(processes[::-1]))
        folder = Path(tempfile.mkdtemp(prefix="switchboard-bench-mcp-"))
        port = free_port()
        server = Process("mcp-tools", [sys.executable, "-m", "tests.mcp_servers.tool_server", str(port),
                                       str(folder / "notes")], stack_env(redis.url), ROOT)
        processes.append(server)
        direct = f"http://127.0.0.1:{port}/mcp"
        (folder / "models.toml").write_text(f'[mcp_servers.tools]\nurl = "{direct}"\n\n'
                                            '[models."echo"]\nbackend = "echo"\n')
        env = stack_env(redis.url, SWITCHBOARD_MODELS=str(folder / "models.toml"),
                        SWITCHBOARD_TOOL_CALLS_PER_MINUTE="1000000", SWITCHBOARD_REQUESTS_PER_MINUTE="1000000")
        processes.append(start_mcp_pool(env, wait=False))
        web, base = start_web(env, wait=False)
        processes.append(web)
        wait_http_ready(server, direct, answered=lambda response: response.status_code < 500)
        for process in processes[1:]:
            process.until_ready()
        return direct, f"{base}/mcp/tools"

    def __exit__(self, *exc) -> None:
        self._exit.close()


def measure(levels: tuple[int, ...], seconds: float, rounds: int, log=print) -> dict:
    rows = []
    with _GatewayStack() as (direct, gateway):
        ways = {"direct": direct, "gateway": gateway}
        for callers in levels:
            readings: dict[str, list[dict]] = {way: [] for way in ways}
            for round_number in range(rounds):
                order = list(ways)[round_number % 2:] + list(ways)[:round_number % 2]
                for way in order:
                    readings[way].append(_summary(asyncio.run(_calls(ways[way], callers, 5, seconds))))
            added = {q: percentile([g[q] - d[q] for g, d in zip(readings["gateway"], readings["direct"])], 0.5)
                     for q in ("p50", "p99")}
            log(f"15. MCP gateway, {callers} caller(s): direct p50 {readings['direct'][0]['p50']:.2f} ms, "
                f"added p50 {added['p50']:.2f} ms, p99 {added['p99']:.2f} ms")
            rows.append({"callers": callers, "direct": readings["direct"], "gateway": readings["gateway"],
                         "added_ms": added})
    return {"setup": SETUP, "rounds": rounds, "seconds": seconds, "rows": rows}


def lines(section: dict) -> list[str]:
    env = section.get("environment")
    out = [f"Run {env['date']} with `{env['command']}` on {env['cpu']} ({env['cores']} cores)." if env else "",
           section["setup"], "", "| callers | direct p50 / p99 ms | gateway p50 / p99 ms | added p50 / p99 ms "
           "(median of rounds) | calls per round |", "|---|---|---|---|---|"]
    for row in section["rows"]:
        def mid(way: str, q: str) -> float:
            return percentile([r[q] for r in row[way]], 0.5)
        out.append(f"| {row['callers']} | {mid('direct', 'p50'):.2f} / {mid('direct', 'p99'):.2f} | "
                   f"{mid('gateway', 'p50'):.2f} / {mid('gateway', 'p99'):.2f} | {row['added_ms']['p50']:.2f} / "
                   f"{row['added_ms']['p99']:.2f} | {min(r['n'] for r in row['gateway'])} |")
    return out
