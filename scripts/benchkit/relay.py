"""3. Relay capacity of one web process, and 4. a thousand open streams.

Capacity: the `echo` model (no delay) answers with the prompt's words, so the
workers produce tokens as fast as they can and the web process's relay is
what is measured: tokens delivered per second, all streams together.

Concurrency: a thousand streams on `echo:slow` (50 ms a token) open at once
against one web process and two gevent workers; every reply is checked, and
the web process's memory and Redis's connection count are sampled meanwhile.
"""
from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import redis

from scripts.benchkit.client import StreamResult, stream
from scripts.benchkit.stack import Endpoints
from scripts.benchkit.stats import summary

PATH = "/v1/chat/completions"


def words(count: int) -> str:
    return " ".join(f"w{i}" for i in range(count))


def _body(model: str, text: str) -> dict:
    return {"model": model, "stream": True, "messages": [{"role": "user", "content": text}],
            "stream_options": {"include_usage": True}}


def _wrong(result: StreamResult, text: str) -> str | None:
    if result.error:
        return result.error
    if result.text != text:
        return f"text differs ({len(result.text)} vs {len(text)} characters)"
    if result.completion_tokens != len(text.split()):
        return f"usage says {result.completion_tokens} tokens, not {len(text.split())}"
    return None


async def capacity(endpoints: Endpoints, levels: tuple[int, ...], tokens: int) -> list[dict]:
    rows = []
    await stream(endpoints.web_port, PATH, _body("echo", words(10)))  # warm up
    for streams in levels:
        text = words(tokens)
        started = time.perf_counter()
        results = await asyncio.gather(*(stream(endpoints.web_port, PATH, _body("echo", text))
                                         for _ in range(streams)))
        elapsed = time.perf_counter() - started
        failures = [w for w in (_wrong(r, text) for r in results) if w]
        delivered = sum(r.completion_tokens or 0 for r in results if not _wrong(r, text))
        rows.append({"streams": streams, "tokens_per_stream": tokens, "seconds": elapsed,
                     "tokens_per_second": delivered / elapsed, "frames_per_stream": results[0].frames,
                     "failures": len(failures), "first_failure": failures[0] if failures else None})
    return rows


def web_worker_pid(web_master_pid: int) -> int:
    """gunicorn's master forks the one worker that serves requests."""
    children = Path(f"/proc/{web_master_pid}/task/{web_master_pid}/children").read_text().split()
    return int(children[0])


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Sampler:
    """Samples the web worker's RSS and Redis's client count in a thread."""

    def __init__(self, pid: int, redis_url: str, every: float = 0.05):
        self.pid, self.every = pid, every
        self._redis = redis.Redis.from_url(redis_url)
        self.rss: list[float] = []
        self.clients: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def clients_now(self) -> int:
        return int(self._redis.info("clients")["connected_clients"]) - 1  # not counting the sampler

    def __enter__(self) -> "Sampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.rss.append(rss_mb(self.pid))
            self.clients.append(self.clients_now())


async def thousand_streams(endpoints: Endpoints, streams: int, tokens: int) -> dict:
    pid = web_worker_pid(endpoints.web.popen.pid)
    text = words(tokens)
    await stream(endpoints.web_port, PATH, _body("echo:slow", words(2)))  # warm up
    sampler = Sampler(pid, endpoints.redis_url)
    idle_clients, idle_rss = sampler.clients_now(), rss_mb(pid)
    with sampler:
        started = time.perf_counter()
        results = await asyncio.gather(*(stream(endpoints.web_port, PATH, _body("echo:slow", text))
                                         for _ in range(streams)))
        elapsed = time.perf_counter() - started
    failures = [w for w in (_wrong(r, text) for r in results) if w]
    return {"streams": streams, "tokens_per_stream": tokens, "seconds": elapsed,
            "correct": streams - len(failures), "first_failure": failures[0] if failures else None,
            "ttft": summary([r.ttft for r in results if r.ttft is not None]),
            "web_rss_idle_mb": idle_rss, "web_rss_peak_mb": max(sampler.rss, default=idle_rss),
            "redis_clients_idle": idle_clients, "redis_clients_peak": max(sampler.clients, default=idle_clients),
            "redis_clients_after": sampler.clients_now()}
