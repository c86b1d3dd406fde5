"""Waiting on states instead of sleeping: a slow, loaded machine takes
longer, and the tests wait for what they need, not for a fixed time."""
from __future__ import annotations

import time
from typing import Callable, TypeVar

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


def queued(redis, queue: str, count: int = 1) -> Callable[[], bool]:
    """The Celery queue holds at least `count` jobs (Redis lists named by queue)."""
    return lambda: redis.llen(queue) >= count
