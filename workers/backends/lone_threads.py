"""How many threads llama.cpp decodes a lone token with (a step holding one
sequence's token: llama.cpp's `n_threads`; larger batches use
`n_threads_batch`, every CPU), chosen by measuring rather than guessed.

Why: one token is bound by memory bandwidth and by how llama.cpp's threads
wait for each other (spinning). On an otherwise idle machine, every core
decodes one person faster than one thread less (workers/backends/cpu_threads.py
keeps a core for the rest of the server); when other processes keep the
cores busy, spinning threads lose whole time slices and one thread less is
several times faster. Which holds changes with the load, so the engine
times its lone steps: it decodes with the count whose recent steps were
fastest, and every TRY_EVERY lone steps (and once its first TRIAL steps were
timed) gives each other count a trial of TRIAL steps (the load may have
changed). A configured `n_threads` is kept
as it is. The count never changes the tokens: llama.cpp splits a product's
rows between threads, each summed by one.
"""
from __future__ import annotations

from collections import deque

TRIAL = 8  # lone steps a trial of another count lasts (and the window each count is judged by)
TRY_EVERY = 512  # lone steps between trials


class LoneThreads:
    def __init__(self, counts: tuple[int, ...]):
        """`counts`: the thread counts to choose among, the safest first (it
        is used until the others were timed)."""
        self.counts = tuple(dict.fromkeys(counts))
        self.best = self.counts[0]
        self._recent = {n: deque(maxlen=TRIAL) for n in self.counts}  # each count's last steps, seconds
        self._steps = 0

    def pick(self) -> int:
        """The count for the next lone step."""
        others = [n for n in self.counts if n != self.best]
        position = self._steps % (TRY_EVERY + TRIAL * len(others))  # (the chosen count's window first)
        trial = position // TRIAL - 1
        return others[trial] if 0 <= trial < len(others) else self.best

    def record(self, threads: int, seconds: float) -> None:
        """A lone step decoded with `threads` (the count `pick` gave) took
        `seconds`. A trial's end compares the counts' medians (a step the
        kernel preempted is one of eight), and the faster is used."""
        self._steps += 1
        recent = self._recent[threads]
        if threads != self.best and len(recent) == TRIAL:
            recent.clear()  # (a new trial: the load may have changed since the last)
        recent.append(seconds)
        if threads != self.best and len(recent) == TRIAL:
            timed = {n: sorted(r)[TRIAL // 2] for n, r in self._recent.items() if len(r) == TRIAL}
            self.best = min(timed, key=timed.__getitem__)
