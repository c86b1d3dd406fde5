"""Section 15: a tool call through the MCP gateway, and a model's
server-side tool call, against the same call made directly on the MCP
server; with `before` (an older source tree), that tree's beside.

One MCP server over streamable HTTP (the tests' tool server, run as a
process; its `say` tool answers at once), shared by every stack. Each tree
is a Switchboard of one web process, one worker (threads) and one MCP pool
process on an embedded Redis of its own, keys off. Gateway callers are the
official `mcp` SDK's clients (the stateless 2026-07-28 era, which both ends
speak), one session each, all in one asyncio process; server-side callers
post chats whose message makes `echo:tools` call `say` (echo then answers
with its result: two model rounds and one server-side call), and the same
chats on `echo`, which has no server tools (one round, no call). `callers`
of them call back to back for the window, each way in turn, the ways'
order rotating by round. Added, per percentile, the median of the rounds:
for the gateway, its latency minus the direct call's; for a server-side
call, the chat with the call minus the chat without it, minus the direct
call's.
"""
from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from scripts.benchkit.stats import percentile
from scripts.embedded_redis import EmbeddedRedis, free_port
from scripts.processes import (
    Process, ROOT, commit_of, stack_env, start_mcp_pool, start_web, start_worker, stop_together, wait_http_ready,
)

SETUP = ("The tests' MCP tool server over streamable HTTP (its `say` tool answers at once) and, per source tree, a "
         "Switchboard of one web process, one worker (threads) and one MCP pool process on a Redis of its own (keys "
         "off), on this machine. Gateway: official `mcp` SDK client sessions (the 2026-07-28 era) calling `say` "
         "directly and through `/mcp/tools`. Server-side: chats whose message makes `echo:tools` call `say` (two "
         "model rounds, one call) against the same chats on `echo` (one round, no call). Callers call back to back "
         "for the window, each way in turn. Added, per percentile, the median of the rounds: the gateway's latency "
         "minus the direct call's; a server-side call's chat minus the chat without it, minus the direct call's.")
REGISTRY = ('[mcp_servers.tools]\nurl = "{url}"\n\n[models."echo"]\nbackend = "echo"\n\n'
            '[models."echo:tools"]\nbackend = "echo"\nmcp_servers = ["tools"]\n')
SAY = '<invoke name="say">\n<parameter name="text">hi</parameter>\n</invoke>'


class _Window:
    """The measured window: it opens once every caller has warmed up (however long that takes on a busy
    machine), and lasts `seconds`."""

    def __init__(self, callers: int, seconds: float):
        self.waiting, self.seconds, self.go, self.deadline = callers, seconds, asyncio.Event(), 0.0

    async def ready(self) -> None:
        self.waiting -= 1
        if self.waiting == 0:
            self.deadline = time.monotonic() + self.seconds
            self.go.set()
        await self.go.wait()

    def open(self) -> bool:
        return time.monotonic() < self.deadline


async def _calls(url: str, callers: int, warmup: int, seconds: float) -> list[float]:
    """Every call's latency (ms), `callers` sessions calling for `seconds` after `warmup` calls each."""
    async def one() -> None:
        http = httpx2.AsyncClient(timeout=60)
        async with Client(streamable_http_client(url, http_client=http), mode="2026-07-28") as client:
            for _ in range(warmup):
                await client.call_tool("say", {"text": "hi"})
            await window.ready()
            while window.open():
                begun = time.perf_counter()
                await client.call_tool("say", {"text": "hi"})
                latencies.append((time.perf_counter() - begun) * 1000)

    latencies: list[float] = []
    window = _Window(callers, seconds)
    await asyncio.gather(*(one() for _ in range(callers)))
    return latencies


def _summary(latencies: list[float]) -> dict:
    return {"p50": percentile(latencies, 0.5), "p99": percentile(latencies, 0.99), "n": len(latencies)}


async def _chats(base: str, model: str, callers: int, warmup: int, seconds: float) -> list[float]:
    """Every chat's latency (ms): `callers` clients posting back to back for `seconds` after `warmup` each."""
    body = {"model": model, "messages": [{"role": "user", "content": SAY}]}

    async def one(client: httpx.AsyncClient) -> None:
        for _ in range(warmup):
            (await client.post(f"{base}/v1/chat/completions", json=body)).raise_for_status()
        await window.ready()
        while window.open():
            begun = time.perf_counter()
            (await client.post(f"{base}/v1/chat/completions", json=body)).raise_for_status()
            latencies.append((time.perf_counter() - begun) * 1000)

    latencies: list[float] = []
    window = _Window(callers, seconds)
    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=callers + 4)) as client:
        await asyncio.gather(*(one(client) for _ in range(callers)))
    return latencies


class _ToolServer:
    def __enter__(self) -> str:
        self._folder = Path(tempfile.mkdtemp(prefix="switchboard-bench-mcp-"))
        port = free_port()
        self._server = Process("mcp-tools", [sys.executable, "-m", "tests.mcp_servers.tool_server", str(port),
                                             str(self._folder / "notes")], stack_env("redis://unused"), ROOT)
        url = f"http://127.0.0.1:{port}/mcp"
        wait_http_ready(self._server, url, answered=lambda response: response.status_code < 500)
        return url

    def __exit__(self, *exc) -> None:
        self._server.stop()


class _Stack:
    """One tree's Switchboard (web, worker, MCP pool) on a Redis of its own, serving the tool server's tools."""

    def __init__(self, tool_server: str, tree: Path = ROOT):
        self.tool_server, self.tree = tool_server, tree

    def __enter__(self) -> str:
        self._exit = ExitStack()
        redis = EmbeddedRedis()
        self._exit.callback(redis.stop)
        processes: list[Process] = []
        self._exit.callback(lambda: stop_together(processes[::-1]))
        folder = Path(tempfile.mkdtemp(prefix="switchboard-bench-mcp-"))
        (folder / "models.toml").write_text(REGISTRY.format(url=self.tool_server))
        env = stack_env(redis.url, SWITCHBOARD_MODELS=str(folder / "models.toml"),
                        SWITCHBOARD_TOOL_CALLS_PER_MINUTE="1000000", SWITCHBOARD_REQUESTS_PER_MINUTE="1000000",
                        SWITCHBOARD_MAX_CONCURRENT="1000")
        processes.append(start_mcp_pool(env, wait=False, cwd=self.tree))
        processes.append(start_worker(env, concurrency=32, queues="local-completion,local", wait=False,
                                      cwd=self.tree))
        web, base = start_web(env, wait=False, cwd=self.tree)
        processes.append(web)
        for process in processes:
            process.until_ready()
        return base

    def __exit__(self, *exc) -> None:
        self._exit.close()


def _ways(direct: str, stacks: dict[str, str]) -> dict:
    """Each way's measurement, by name: the direct call, then per tree its gateway, server-side and plain chats."""
    ways = {"direct": lambda c, s: _calls(direct, c, 5, s)}
    for tree, base in stacks.items():
        suffix = "" if tree == "now" else f" {tree}"
        ways["gateway" + suffix] = lambda c, s, base=base: _calls(f"{base}/mcp/tools", c, 5, s)
        ways["server_side" + suffix] = lambda c, s, base=base: _chats(base, "echo:tools", c, 2, s)
        ways["chat" + suffix] = lambda c, s, base=base: _chats(base, "echo", c, 2, s)
    return ways


def _added(readings: dict, suffix: str) -> dict:
    def median_of(difference) -> dict:
        return {q: percentile([difference(round_, q) for round_ in range(len(readings["direct"]))], 0.5)
                for q in ("p50", "p99")}
    direct, gateway = readings["direct"], readings["gateway" + suffix]
    side, chat = readings["server_side" + suffix], readings["chat" + suffix]
    return {"gateway": median_of(lambda r, q: gateway[r][q] - direct[r][q]),
            "server_side": median_of(lambda r, q: side[r][q] - chat[r][q] - direct[r][q])}


def measure(levels: tuple[int, ...], seconds: float, rounds: int, log=print, before: Path | None = None) -> dict:
    rows = []
    trees = {"now": ROOT} | ({"before": before} if before else {})
    with ExitStack() as stack:
        direct = stack.enter_context(_ToolServer())
        bases = {name: stack.enter_context(_Stack(direct, tree)) for name, tree in trees.items()}
        ways = _ways(direct, bases)
        for callers in levels:
            readings: dict[str, list[dict]] = {way: [] for way in ways}
            for round_number in range(rounds):
                names = list(ways)
                for way in names[round_number % len(names):] + names[:round_number % len(names)]:
                    readings[way].append(_summary(asyncio.run(ways[way](callers, seconds))))
            added = {tree: _added(readings, "" if tree == "now" else f" {tree}") for tree in trees}
            for tree, of_tree in added.items():
                log(f"15. MCP tools ({tree}), {callers} caller(s): direct p50 {readings['direct'][0]['p50']:.2f} ms, "
                    f"added p50 {of_tree['gateway']['p50']:.2f} ms through the gateway, "
                    f"{of_tree['server_side']['p50']:.2f} ms server-side")
            rows.append({"callers": callers, **readings, "added_ms": added["now"]["gateway"],
                         "server_side_added_ms": added["now"]["server_side"],
                         **({"before_added_ms": added["before"]} if before else {})})
    return {"setup": SETUP, "rounds": rounds, "seconds": seconds, "rows": rows,
            "trees": {name: commit_of(tree) for name, tree in trees.items()}}


def lines(section: dict) -> list[str]:
    env, trees = section.get("environment"), section.get("trees", {"now": ""})
    out = [f"Run {env['date']} with `{env['command']}` on {env['cpu']} ({env['cores']} cores)." if env else "",
           section["setup"], "", "Trees: " + ", ".join(f"{name} ({commit})" for name, commit in trees.items())
           if section.get("trees") else "", "",
           "| callers | tree | direct p50 / p99 ms | gateway p50 / p99 ms | added p50 / p99 ms | chat with a "
           "server-side call p50 / p99 ms | chat without p50 ms | added p50 / p99 ms | calls per round |",
           "|---|---|---|---|---|---|---|---|---|"]
    for row in section["rows"]:
        def mid(way: str, q: str) -> float:
            return percentile([r[q] for r in row[way]], 0.5) if way in row else float("nan")
        for tree in trees:
            suffix = "" if tree == "now" else f" {tree}"
            added = {"gateway": row["added_ms"], "server_side": row.get("server_side_added_ms")} if tree == "now" \
                else row["before_added_ms"]
            side = added["server_side"] or {"p50": float("nan"), "p99": float("nan")}
            out.append(f"| {row['callers']} | {tree} | {mid('direct', 'p50'):.2f} / {mid('direct', 'p99'):.2f} | "
                       f"{mid('gateway' + suffix, 'p50'):.2f} / {mid('gateway' + suffix, 'p99'):.2f} | "
                       f"{added['gateway']['p50']:.2f} / {added['gateway']['p99']:.2f} | "
                       f"{mid('server_side' + suffix, 'p50'):.2f} / {mid('server_side' + suffix, 'p99'):.2f} | "
                       f"{mid('chat' + suffix, 'p50'):.2f} | {side['p50']:.2f} / {side['p99']:.2f} | "
                       f"{min(r['n'] for r in row['gateway' + suffix])} |")
    return out
