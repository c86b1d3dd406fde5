"""llama.cpp's helper threads, where it is built with OpenMP (GNU libgomp:
the Linux wheels and our own build).

Every OS thread that runs a model's computation (a model's decode thread,
the worker thread that embeds) keeps a team of helper threads for its next
one, for as long as it lives. While the process holds more OpenMP threads
than it has CPUs, libgomp stops every thread spinning at the barriers
between a token's operations: they sleep and are woken instead, dozens of
times per token. On 2 cores one person's decode fell from ~100 to ~34
tokens/s once a second model (the default registry's embedding model) had
computed once, though it then sat idle.

So a thread that stops computing gives its team back (OpenMP 5's
`omp_pause_resource_all`); its next computation starts a new one (a thread
start, some 50 us). Where llama.cpp has no OpenMP this does nothing.
"""
from __future__ import annotations

import ctypes
import functools
from typing import Callable

OMP_PAUSE_SOFT = 1  # omp_pause_resource_t: the threads go, the settings stay


def release() -> None:
    """Give back the calling thread's helper threads, if it holds any.
    Called after a computation (llama.cpp and its libgomp are loaded)."""
    pause = _find_pause()
    if pause is not None:
        pause(OMP_PAUSE_SOFT)


@functools.cache  # (looked up once: after the first computation, libgomp is loaded or never will be)
def _find_pause() -> Callable[[int], int] | None:
    path = _loaded("libgomp")
    if path is None:
        return None
    try:
        pause = ctypes.CDLL(path).omp_pause_resource_all
    except (OSError, AttributeError):  # an OpenMP older than 5.0: nothing to give back with
        return None
    pause.argtypes, pause.restype = [ctypes.c_int], ctypes.c_int
    return pause


def _loaded(name: str) -> str | None:
    """The path of a shared library this process has loaded, by name."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                fields = line.split(maxsplit=5)
                if len(fields) == 6 and name in fields[5].rsplit("/", 1)[-1]:
                    return fields[5].strip()
    except OSError:  # not Linux
        return None
    return None
