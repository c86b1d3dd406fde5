"""Percentiles, and the small helpers that run requests concurrently."""
from __future__ import annotations

import asyncio
import math
from typing import Awaitable, Callable, Sequence, TypeVar

T = TypeVar("T")


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    position = (len(ordered) - 1) * q
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summary(values: Sequence[float], scale: float = 1000.0) -> dict:
    """p50/p95/p99 (milliseconds for seconds in, by default) and the count."""
    return {"p50": percentile(values, 0.50) * scale, "p95": percentile(values, 0.95) * scale,
            "p99": percentile(values, 0.99) * scale, "n": len(values)}


async def run_concurrently(make: Callable[[], Awaitable[T]], concurrency: int, total: int) -> list[T]:
    """`total` calls of `make()`, at most `concurrency` at a time (each lane
    starts its next call when its previous one ended)."""
    results: list[T] = []
    remaining = iter(range(total))

    async def lane() -> None:
        for _ in remaining:
            results.append(await make())

    await asyncio.gather(*(lane() for _ in range(concurrency)))
    return results
