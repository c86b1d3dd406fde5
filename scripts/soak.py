"""A bounded soak on loopback: mixed load on a stack of its own (its own
Redis, one web process, one worker), a web process and a worker killed with
SIGKILL and restarted during it; then a report of requests by outcome, 5xx
answers outside the kill windows (target 0), slots and queue places back to
zero, and Redis keys and process memory at the start and the end.

    python scripts/soak.py                 # 90 s
    python scripts/soak.py --seconds 40 --report docs/soak.md

Records are kept SWITCHBOARD_RECORD_SECONDS (here 10 s, so that the run
reaches its steady state): the Redis key count, sampled every 5 s, levels
off at about two keys per request of the last retention period.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts.embedded_redis import EmbeddedRedis  # noqa: E402
from scripts.processes import stack_env, start_web, start_worker, wait_http_ready  # noqa: E402

KILL_WINDOW_SECONDS = 15  # answers this long after a kill may fail: the crash is the test
CLIENTS = 12


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def one_request(client: httpx.Client, base: str, rng: random.Random) -> str:
    """One request of the mix; returns its outcome."""
    kind = rng.choice(["chat", "stream", "abandon", "generate"])
    words = " ".join(f"w{i}" for i in range(rng.randint(3, 30)))
    if kind == "chat":
        response = client.post(f"{base}/api/chat", json={"model": "echo", "stream": False,
                                                          "messages": [{"role": "user", "content": words}]})
        return str(response.status_code)
    if kind == "generate":
        response = client.post(f"{base}/api/generate", json={"model": "echo:slow", "prompt": words[:40],
                                                              "stream": False})
        return str(response.status_code)
    body = {"model": "echo:slow", "stream": True, "messages": [{"role": "user", "content": words}]}
    with client.stream("POST", f"{base}/v1/chat/completions", json=body) as response:
        if response.status_code != 200:
            return str(response.status_code)
        for n, line in enumerate(response.iter_lines()):
            if kind == "abandon" and n >= 3:
                return "abandoned"
            if '"error"' in line:
                return "in-band error"
    return "200"


def load(base_url: list[str], until: float, outcomes: list, seed: int) -> None:
    rng = random.Random(seed)
    with httpx.Client(timeout=60) as client:
        while time.monotonic() < until:
            started = time.monotonic()
            try:
                outcome = one_request(client, base_url[0], rng)
            except httpx.HTTPError as error:
                outcome = type(error).__name__
            outcomes.append((started, time.monotonic(), outcome))


def redis_state(client: redis.Redis) -> dict:
    def total(pattern: str) -> int:
        return sum(client.zcard(k) for k in client.scan_iter(match=pattern))
    return {"keys": client.dbsize(), "memory_mb": round(client.info("memory")["used_memory"] / 2**20, 1),
            "slots": total("switchboard:active:*"), "queue_places": total("switchboard:queued:*"),
            "queue_depth": total("switchboard:fq:*:ready:*")}


def sample_keys(client: redis.Redis, until: float, samples: list) -> None:
    while time.monotonic() < until:
        time.sleep(5)
        samples.append(client.dbsize())


def soak(seconds: float, record_seconds: int) -> dict:
    server = EmbeddedRedis()
    client = redis.Redis.from_url(server.url)
    # The rate limit is off the path: the soak is about failures and leaks,
    # and its twelve clients (one person on loopback) send more than the
    # default 600 requests a minute; refusals would hide real 5xx answers.
    env = stack_env(server.url, SWITCHBOARD_HEARTBEAT_TIMEOUT="2", SWITCHBOARD_KEEPALIVE="1",
                    SWITCHBOARD_RECORD_SECONDS=str(record_seconds), SWITCHBOARD_REQUESTS_PER_MINUTE="1000000")
    worker = start_worker(env, concurrency=8)
    web, base = start_web(env)
    try:
        start = {"redis": redis_state(client), "web_mb": rss_mb(children(web.popen.pid)[0]),
                 "worker_mb": rss_mb(worker.popen.pid)}
        began = time.monotonic()
        outcomes: list = []
        key_counts: list[int] = []
        threads = [threading.Thread(target=load, args=([base], began + seconds, outcomes, n)) for n in range(CLIENTS)]
        threads.append(threading.Thread(target=sample_keys, args=(client, began + seconds, key_counts)))
        for thread in threads:
            thread.start()
        kills = []
        time.sleep(seconds * 0.3)
        os.kill(children(web.popen.pid)[0], signal.SIGKILL)  # gunicorn's master starts a new worker
        kills.append(time.monotonic())
        wait_http_ready(web, f"{base}/api/version")
        time.sleep(seconds * 0.3)
        worker.stop(signal.SIGKILL)
        kills.append(time.monotonic())
        worker = start_worker(env, concurrency=8)
        for thread in threads:
            thread.join()
        settle_deadline = time.monotonic() + 30
        while time.monotonic() < settle_deadline:
            end_redis = redis_state(client)
            if not (end_redis["slots"] or end_redis["queue_places"] or end_redis["queue_depth"]):
                break
            time.sleep(0.5)
        def in_window(started: float, ended: float) -> bool:
            """In flight at a kill, or started within the window after it."""
            return any(started <= k + KILL_WINDOW_SECONDS and ended >= k for k in kills)

        return {
            "seconds": seconds, "clients": CLIENTS, "requests": len(outcomes), "record_seconds": record_seconds,
            "key_counts": key_counts,
            "outcomes": dict(Counter(o for _, _, o in outcomes).most_common()),
            "5xx_outside_kill_windows": sum(1 for s, e, o in outcomes if o.startswith("5") and not in_window(s, e)),
            "failures_in_kill_windows": sum(1 for s, e, o in outcomes
                                            if o not in ("200", "abandoned") and in_window(s, e)),
            "start": start,
            "end": {"redis": end_redis, "web_mb": rss_mb(children(web.popen.pid)[0]), "worker_mb": rss_mb(worker.popen.pid)},
        }
    finally:
        web.stop()
        worker.stop()
        server.stop()


def markdown(result: dict) -> str:
    start, end = result["start"], result["end"]
    return "\n".join([
        "# Soak", "",
        f"`python scripts/soak.py --seconds {result['seconds']:g}`: {result['clients']} clients on loopback (echo models), "
        "the web process's gunicorn worker killed with SIGKILL at 30% of the run, the Celery worker at 60% "
        "(and a new one started).", "",
        f"- requests: {result['requests']}; by outcome: {json.dumps(result['outcomes'])}",
        f"- 5xx outside the kill windows (requests in flight at a kill, or started within {KILL_WINDOW_SECONDS} s "
        f"after it): **{result['5xx_outside_kill_windows']}** (target 0); "
        f"failed requests inside them: {result['failures_in_kill_windows']}",
        f"- slots / queue places / queue depth at the end: {end['redis']['slots']} / {end['redis']['queue_places']} / "
        f"{end['redis']['queue_depth']} (target 0)",
        f"- Redis keys: {start['redis']['keys']} at the start, {end['redis']['keys']} at the end; "
        f"memory {start['redis']['memory_mb']} -> {end['redis']['memory_mb']} MB",
        f"- Redis keys every 5 s under the load, records kept {result['record_seconds']} s: "
        f"{', '.join(map(str, result['key_counts']))} (steady state: about two keys per request of the last "
        f"{result['record_seconds']} s)",
        f"- web process RSS {start['web_mb']:.0f} -> {end['web_mb']:.0f} MB; worker RSS {start['worker_mb']:.0f} -> "
        f"{end['worker_mb']:.0f} MB", ""])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=90)
    parser.add_argument("--record-seconds", type=int, default=10, help="SWITCHBOARD_RECORD_SECONDS for the run")
    parser.add_argument("--report", type=Path)
    args = parser.parse_args()
    result = soak(args.seconds, args.record_seconds)
    text = markdown(result)
    print(text)
    if args.report:
        args.report.write_text(text)
    return 0 if result["5xx_outside_kill_windows"] == 0 and not any(
        result["end"]["redis"][k] for k in ("slots", "queue_places", "queue_depth")) else 1


if __name__ == "__main__":
    sys.exit(main())
