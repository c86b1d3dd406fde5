"""18. An office's load against LiteLLM: what one request costs (issue 74).

An instant OpenAI-compatible upstream (the benchmark's own: TOKENS tokens at
once) behind Switchboard as `make run` starts it (one web process, one
gevent upstream worker; admission limits opened), LiteLLM's proxy (two
workers, no database: no spend logs), with `before` an older tree of
Switchboard started the same way, and the floor of Switchboard's design
(design_floor.py: Flask, Celery and the upstream call with nothing else;
whole chat only), all in one run. Closed-loop clients (each
sends its next request when its last one ended, a new connection each) at
LEVELS, for each variant: chat completions, Anthropic's messages and
OpenAI's Responses, streamed and whole. The ways take turns at every level
and variant, ROUNDS times a window each. Per way: requests/s, p50 and p99
of a request's time, time to first token (streamed), failures; and the peak
resident memory of each of its processes over the whole run.
"""
from __future__ import annotations

import asyncio
import tempfile
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from scripts.benchkit import design_floor
from scripts.benchkit.client import StreamResult, stream
from scripts.benchkit.overhead import (CHAT_PATH, MESSAGES_PATH, RESPONSES_PATH, chat_body, messages_body,
                                       responses_body)
from scripts.benchkit.scale import process_tree, registry_text, start_server
from scripts.benchkit.stack import LITELLM_KEY, launch_litellm
from scripts.benchkit.stats import percentile
from scripts.benchkit.upstream import WORD
from scripts.embedded_redis import EmbeddedRedis, free_port
from scripts.processes import ROOT, commit_of, start_fake_upstream, wait_http_ready

TOKENS = 35
LEVELS = (1, 10, 64, 256)
ROUTES = {"chat": (CHAT_PATH, chat_body, "up-"), "messages": (MESSAGES_PATH, messages_body, "bridged-"),
          "responses": (RESPONSES_PATH, responses_body, "bridged-")}


@dataclass(frozen=True)
class Sizes:
    levels: tuple[int, ...] = LEVELS
    window: float = 3.0  # seconds a way is measured per round (after a warm-up of a second)
    rounds: int = 2
    variants: tuple[str, ...] = ("chat", "chat streamed", "messages", "messages streamed", "responses",
                                 "responses streamed")


@dataclass
class Way:
    name: str
    port: int
    pids: list[int]  # its processes' (for their memory)
    headers: dict
    litellm: bool = False
    variants: tuple[str, ...] | None = None  # the variants it serves (None: all)


def _body(way: Way, variant: str) -> tuple[str, dict]:
    route, _, streamed = variant.partition(" ")
    path, body_of, prefix = ROUTES[route]
    body = body_of((prefix if way.litellm else "up-") + "instant", TOKENS) | {"stream": bool(streamed)}
    if not streamed:
        body.pop("stream_options", None)
    return path, body


def _wrong(result: StreamResult) -> str | None:
    if result.error:
        return result.error
    if result.text != " ".join([WORD] * TOKENS):
        return f"text differs: {result.text[:80]!r}"
    return None


async def _window(way: Way, variant: str, clients: int, warmup: float, window: float) -> list[StreamResult]:
    path, body = _body(way, variant)
    start = time.perf_counter()
    opens, closes = start + warmup, start + warmup + window
    counted: list[StreamResult] = []

    async def client() -> None:
        while time.perf_counter() < closes:
            result = await stream(way.port, path, body, way.headers)
            if opens <= time.perf_counter() <= closes:
                counted.append(result)
    await asyncio.gather(*(client() for _ in range(clients)))
    return counted


def _row(results: list[StreamResult], seconds: float, streamed: bool) -> dict:
    failures = [why for why in map(_wrong, results) if why]
    good = [r for r in results if _wrong(r) is None]
    totals = [r.total * 1000 for r in good]
    row = {"rps": round(len(good) / seconds, 1), "requests": len(results), "failures": len(failures),
           "first_failure": failures[0][:200] if failures else None,
           "p50_ms": round(percentile(totals, 0.5), 2) if good else None,
           "p99_ms": round(percentile(totals, 0.99), 2) if good else None}
    if streamed and good:
        row["ttft_p50_ms"] = round(percentile([r.ttft * 1000 for r in good], 0.5), 2)
    return row


class Memory:
    """The peak resident memory of each way's processes, sampled while the run lasts."""

    def __init__(self, ways: list[Way]):
        self.peak: dict[str, dict[int, int]] = {way.name: {} for way in ways}
        self._ways, self._stop = ways, threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.2):
            for way in self._ways:
                for pid in (p for root in way.pids for p in process_tree(root)):
                    peak = self.peak[way.name]
                    peak[pid] = max(peak.get(pid, 0), _rss_kb(pid))

    def stop(self) -> dict[str, list[float]]:
        self._stop.set()
        self._thread.join()
        return {name: sorted((round(kb / 1024, 1) for kb in peaks.values()), reverse=True)
                for name, peaks in self.peak.items()}


def _rss_kb(pid: int) -> int:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return 0
    return int(status.split("VmRSS:")[1].split()[0]) if "VmRSS:" in status else 0


def _start(stack: ExitStack, before: Path | None) -> list[Way]:
    redis = EmbeddedRedis()
    stack.callback(redis.stop)
    upstream_port = free_port()
    upstream = start_fake_upstream(upstream_port, TOKENS, wait=False)
    stack.callback(upstream.stop)
    litellm, litellm_port = launch_litellm(upstream_port, workers=2, env={"DISABLE_SPEND_LOGS": "True"})
    stack.callback(litellm.stop)
    wait_http_ready(upstream, f"http://127.0.0.1:{upstream_port}/v1/models")
    registry = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="switchboard-office-"))) / "models.toml"
    registry.write_text(registry_text(upstream_port))
    ways = []
    for index, (name, tree) in enumerate((("switchboard", ROOT), ("switchboard before", before))):
        if tree is not None:
            server = start_server(stack, name, tree, f"{redis.url.rsplit('/', 1)[0]}/{index + 1}", registry, 1, 1,
                                  100)
            ways.append(Way(f"{name} ({commit_of(tree)})", server.port,
                            [server.web.popen.pid] + [w.popen.pid for w in server.workers], {}))
    floor_port, floor = design_floor.start(stack, f"{redis.url.rsplit('/', 1)[0]}/3", upstream_port)
    wait_http_ready(litellm, f"http://127.0.0.1:{litellm_port}/health/liveliness", timeout=120)
    design_floor.ready(floor_port, floor)
    ways.append(Way(design_floor.NAME, floor_port, [p.popen.pid for p in floor], {}, variants=("chat",)))
    ways.append(Way("litellm", litellm_port, [litellm.popen.pid], {"Authorization": f"Bearer {LITELLM_KEY}"},
                    litellm=True))
    return ways


def measure(sizes: Sizes, before: Path | None = None, log=print) -> dict:
    rows = []
    with ExitStack() as stack:
        ways = _start(stack, before)
        memory = Memory(ways)
        for variant in sizes.variants:
            for clients in sizes.levels:
                log(f"18. office load: {variant}, {clients} clients")
                rows += _level(ways, variant, clients, sizes)
        peaks = memory.stop()
    return {"tokens": TOKENS, "window_s": sizes.window, "rounds": sizes.rounds, "rows": rows,
            "peak_rss_mb": peaks}


def _level(ways: list[Way], variant: str, clients: int, sizes: Sizes) -> list[dict]:
    """The ways take turns, each round starting with the next."""
    ways = [way for way in ways if way.variants is None or variant in way.variants]
    results: dict[str, list[StreamResult]] = {way.name: [] for way in ways}
    for index in range(sizes.rounds):
        for way in ways[index % len(ways):] + ways[:index % len(ways)]:
            results[way.name] += asyncio.run(_window(way, variant, clients, 1.0, sizes.window))
    streamed = variant.endswith("streamed")
    return [{"way": name, "variant": variant, "clients": clients,
             **_row(found, sizes.window * sizes.rounds, streamed)} for name, found in results.items()]


def lines(section: dict) -> list[str]:
    found = [f"An instant upstream ({section['tokens']} tokens at once); closed-loop clients, a new connection a "
             f"request; the ways take turns, {section['rounds']} windows of {section['window_s']:g} s each per "
             "level and variant.", "",
             "| variant | clients | way | req/s | p50 / p99 ms | first token p50 ms | failures |",
             "|---|---|---|---|---|---|---|"]
    for row in section["rows"]:
        p50 = f"{row['p50_ms']:.1f} / {row['p99_ms']:.1f}" if row["p50_ms"] is not None else "-"
        ttft = f"{row['ttft_p50_ms']:.1f}" if row.get("ttft_p50_ms") is not None else "-"
        found.append(f"| {row['variant']} | {row['clients']} | {row['way']} | {row['rps']:.0f} | {p50} | {ttft} | "
                     f"{row['failures']} |")
    best: dict[str, float] = {}
    for row in section["rows"]:
        best[row["way"]] = max(best.get(row["way"], 0), row["rps"])
    found += ["", "Peak requests/s of each way over the levels and variants it serves (the design's floor: "
              "whole chat only): " + ", ".join(f"{way} {rps:.0f}" for way, rps in best.items()) + "."]
    found += ["", "Peak resident memory of each process (MB), over the run:", ""]
    found += [f"- {name}: {', '.join(f'{mb:g}' for mb in peaks)} (total {sum(peaks):.0f} MB)"
              for name, peaks in section["peak_rss_mb"].items()]
    return found
