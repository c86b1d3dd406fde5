"""5. Abort latency and 6. queue latency, read from what Switchboard records
in Redis (the job's state hash, its abort mark), timed against the moment
the client acted. Everything runs on one machine, so the wall clocks agree.

- Streaming abort: a stream on `echo:slow` is read up to its first text, then
  its socket is closed; the time until the worker records the job finished
  with reason "aborted" (`finished_at`).
- Queued abort: the local pool's one slot is held by a long job; a stream
  queued behind it is closed; the time until the abort mark is set. When the
  slot frees, the job must be dropped unrun: no `started_at`, ever.
- Queue latency: request sent -> the worker's `started_at`, one request at a
  time (idle) and while hundreds of other streams are running (under load).
"""
from __future__ import annotations

import asyncio
import json
import socket
import time

import redis

from jobqueue import status as job_state
from protocol.keys import abort_key
from scripts.benchkit.client import request_bytes, stream
from scripts.benchkit.relay import words
from scripts.benchkit.stack import Endpoints
from scripts.benchkit.stats import summary

PATH = "/v1/chat/completions"


def _body(model: str, text: str) -> dict:
    return {"model": model, "stream": True, "messages": [{"role": "user", "content": text}]}


def open_stream(port: int, body: dict, until_text: bool) -> tuple[socket.socket, str]:
    """A blocking socket with the stream's headers (and first text) read;
    returns it with the job id from X-Job-Id."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(request_bytes(PATH, body))
    seen = b""
    while b"\r\n\r\n" not in seen or (until_text and b"w0" not in seen):
        piece = sock.recv(65536)
        if not piece:
            raise RuntimeError(f"the stream ended early: {seen[:300]!r}")
        seen += piece
    head = seen.split(b"\r\n\r\n", 1)[0].decode("latin-1")
    job_id = next(line.split(":", 1)[1].strip() for line in head.split("\r\n") if line.lower().startswith("x-job-id:"))
    return sock, job_id


def _wait_for(check, timeout: float = 10.0, every: float = 0.0005):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every)
    raise TimeoutError("the abort was never recorded")


def streaming_aborts(endpoints: Endpoints, count: int) -> dict:
    client = redis.Redis.from_url(endpoints.redis_url)
    latencies = []
    for _ in range(count):
        sock, job_id = open_stream(endpoints.web_port, _body("echo:slow", words(200)), until_text=True)
        sock.close()
        closed_at = time.time()
        state = _wait_for(lambda: (s := job_state(client, job_id)).get("reason") and s)
        if state["reason"] != "aborted":
            raise RuntimeError(f"job {job_id} ended {state}, not aborted")
        latencies.append(float(state["finished_at"]) - closed_at)
        time.sleep(0.02)
    return {"latency": summary(latencies), "aborted": len(latencies)}


def queued_aborts(endpoints: Endpoints, count: int) -> dict:
    client = redis.Redis.from_url(endpoints.redis_url)
    # The holder keeps the one slot busy for longer than the loop below can
    # take (each queued stream opens at its first keep-alive): a job that
    # starts because the holder ended would have started with its client
    # still there, not after it left.
    holder, holder_id = open_stream(endpoints.web_port, _body("echo:local", words(max(400, count * 20))),
                                    until_text=True)
    latencies, job_ids = [], []
    try:
        for _ in range(count):
            sock, job_id = open_stream(endpoints.web_port, _body("echo:local", words(5)), until_text=False)
            sock.close()
            closed_at = time.time()
            _wait_for(lambda: client.exists(abort_key(job_id)))
            latencies.append(time.time() - closed_at)  # polled every 0.5 ms: at most that late
            job_ids.append(job_id)
    finally:
        holder.close()  # frees the slot: the worker now takes the abandoned jobs, and must drop them
    states = [_wait_for(lambda j=j: (s := job_state(client, j)).get("reason") and s) for j in job_ids]
    started = [s for s in states if "started_at" in s or s.get("reason") != "aborted"]
    return {"latency": summary(latencies), "queued": len(job_ids), "started_after_abort": len(started),
            "states": json.dumps(states[:1])}


async def queue_latency(endpoints: Endpoints, probes: int, background: int) -> dict:
    client = redis.Redis.from_url(endpoints.redis_url)

    async def probe_series() -> list[float]:
        waits = []
        for _ in range(probes):
            result = await stream(endpoints.web_port, PATH, _body("echo", "ping"))
            state = job_state(client, result.headers["x-job-id"])
            waits.append(float(state["started_at"]) - result.sent_at)
            await asyncio.sleep(0.01)
        return waits

    idle = await probe_series()
    load = [asyncio.ensure_future(stream(endpoints.web_port, PATH, _body("echo:slow", words(60))))
            for _ in range(background)]
    await asyncio.sleep(0.5)  # let the load build up
    loaded = await probe_series()
    await asyncio.gather(*load)
    return {"idle": summary(idle), "under_load": summary(loaded), "background_streams": background}
