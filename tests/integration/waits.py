"""Waiting on states instead of sleeping: a slow, loaded machine takes
longer, and the tests wait for what they need, not for a fixed time."""
from __future__ import annotations

import time
from typing import Callable, TypeVar

from protocol import keys

T = TypeVar("T")


def wait_until(condition: Callable[[], T], timeout: float = 30, what: str = "the condition") -> T:
    """Poll `condition` until it returns something truthy (returned)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.01)


def waiting(redis, queue: str) -> int:
    """Jobs waiting in the fair queue behind a Celery queue's name ("pool" for
    its chat jobs, "pool-completion" for its code completions)."""
    pool = queue.removesuffix("-completion")
    return redis.zcard(keys.fair_ready_key(pool, "completion" if queue.endswith("-completion") else "chat"))


def queued(redis, queue: str, count: int = 1) -> Callable[[], bool]:
    """At least `count` jobs wait behind the queue (see `waiting`)."""
    return lambda: waiting(redis, queue) >= count
