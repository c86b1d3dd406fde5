"""Python's cyclic garbage collector, tuned once a process has started.

Both processes allocate a few thousand short-lived objects per request (pydantic
models, Redis replies, event dicts) and free almost all of them by reference
counting. With CPython's default threshold (700 net allocations) the collector
still ran a young-generation pass every few requests and a full pass over the
whole heap, imports included, every few seconds under load: a share of the
CPU that grew with concurrency (docs/benchmarks-notes.md has the
measurements). So, once started:

- `gc.freeze()` moves everything alive after start-up (modules, the registry,
  the Flask app, the Celery app) out of the collector's sight, as Instagram
  does for its Django workers: full passes no longer walk it;
- the young generation's threshold is raised, so a pass runs every
  `threshold` net allocations. Garbage in reference cycles lives that much
  longer: about a megabyte at 10,000.

A threshold of 0 leaves Python's defaults alone.
"""
from __future__ import annotations

import gc


def tune_garbage_collector(threshold: int) -> None:
    if threshold <= 0:
        return
    gc.collect()  # what start-up left as garbage is not frozen with the rest
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(threshold, older, oldest)
