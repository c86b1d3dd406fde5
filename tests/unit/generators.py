"""A generator of pieces drained as the rounds drain a backend's: what it
yielded, and what it returned (a backend's Outcome)."""
from __future__ import annotations

from typing import Generator


def drained(generator: Generator) -> tuple[list, object]:
    got = []
    while True:
        try:
            got.append(next(generator))
        except StopIteration as end:
            return got, end.value
