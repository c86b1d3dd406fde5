"""How many threads llama.cpp gets by default: the machine, as Ollama and
llama.cpp's server give it. Decoding a token is bound by memory bandwidth,
which a second hyperthread of a core does not add, so it uses one thread
per physical core; evaluating a prompt (or a batch of several people's
tokens) is bound by arithmetic, so it uses every CPU this process may run on.

llama-cpp-python's own default is half the logical CPUs, which left half of
a 2-core machine idle.
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
    return configured or physical_cores()


def batch_threads(configured: int | None) -> int:
    return configured or usable_cpus()
