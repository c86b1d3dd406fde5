"""How many threads llama.cpp gets by default: the machine. Evaluating a
prompt (or a batch of several people's tokens) is bound by arithmetic, so it
uses every CPU this process may run on (or, unless configured, one less while
that is faster: workers/backends/thread_choice.py). Decoding one token is bound by
memory bandwidth, which a second hyperthread of a core does not add: one
thread per physical core, less one for the rest of a shared server (the web
process, Redis, the worker's own threads).

Why one less: llama.cpp's threads wait for each other by spinning, so when
another process takes a core they lose whole time slices. On 2 cores with
two busy processes beside it, one person decoded at 25 tokens/s with two
threads and 97 with one; with the cores idle, one and two threads decode
one person equally fast. (llama-cpp-python's own default, half the logical
CPUs, also gave prompts only half of a 2-core machine.)

That holds when other processes keep the cores busy. On an idle machine one
person decodes faster with every core, so unless `n_threads` is configured
the engine times both counts and uses the faster (workers/backends/thread_choice.py).
"""
from __future__ import annotations

import os

import psutil


def usable_cpus() -> int:
    """The CPUs this process may run on (a container's or taskset's limit)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def physical_cores() -> int:
    """Physical cores among the usable CPUs (all of them if unknown)."""
    cores = psutil.cpu_count(logical=False)
    logical = psutil.cpu_count(logical=True)
    usable = usable_cpus()
    if not cores or not logical:
        return usable
    return max(1, min(usable, round(usable * cores / logical)))


def decode_threads(configured: int | None) -> int:
    return configured or max(1, physical_cores() - 1)


def batch_threads(configured: int | None) -> int:
    return configured or usable_cpus()
