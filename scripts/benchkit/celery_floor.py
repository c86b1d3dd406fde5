"""The floor under Switchboard's queue hop: how long Celery itself takes,
on the same Redis, from sending a task to the task starting, for a task
that does nothing. Switchboard's jobs cross this hop twice as fast as
nothing can; the report shows it beside the gateway overhead.

Its worker runs as `celery -A scripts.benchkit.celery_floor worker -P gevent`,
configured as Switchboard's workers are (prefetch 1, no prefetch while busy,
no ack emulation, priority queue order)."""
from __future__ import annotations

import os
import time
from functools import lru_cache

import redis
from celery import Celery

from scripts.benchkit.stats import summary

QUEUE = "floor"
RESULTS = "switchboard:bench:floor"
TASK = "bench.floor"

app = Celery("floor", broker=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
app.conf.update(task_ignore_result=True, worker_prefetch_multiplier=1, worker_disable_prefetch=True,
                broker_transport_options={"queue_order_strategy": "priority", "ack_emulation": False},
                worker_hijack_root_logger=False)


@lru_cache(maxsize=1)
def _results() -> redis.Redis:
    return redis.Redis.from_url(app.conf.broker_url)


@app.task(name=TASK)
def floor(sent_at: float) -> None:
    _results().rpush(RESULTS, time.time() - sent_at)


def measure(redis_url: str, count: int) -> dict:
    """Send `count` no-op tasks one at a time (after 5 to warm up); the
    pickup latency of each, send included (about 0.4 ms of it)."""
    client = redis.Redis.from_url(redis_url)
    client.delete(RESULTS)
    sender = Celery("floor", broker=redis_url)
    for sent in range(1, count + 6):
        sender.send_task(TASK, args=[time.time()], queue=QUEUE, ignore_result=True)
        deadline = time.monotonic() + 5
        while client.llen(RESULTS) < sent and time.monotonic() < deadline:
            time.sleep(0.0005)
        time.sleep(0.005)
    return {"pickup": summary([float(v) for v in client.lrange(RESULTS, 5, -1)])}
