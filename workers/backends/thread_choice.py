"""How many threads llama.cpp decodes a step with, chosen by measuring
rather than guessed: a lone token's step (one sequence's token: llama.cpp's
`n_threads`), and a prompt's chunks (`n_threads_batch`), each by its own
`ThreadChoice`.

Why: one token is bound by memory bandwidth and by how llama.cpp's threads
wait for each other (spinning). On an otherwise idle machine, every core
decodes one person faster than one thread less (workers/backends/cpu_threads.py
keeps a core for the rest of the server); when other processes keep the
cores busy, spinning threads lose whole time slices and one thread less is
many times faster. A prompt's chunks are bound by arithmetic, every core
evaluates them twice as fast on an idle machine, and beside one busy process
one thread less was 2.7 times faster in the worker. Which holds changes with
the load, so the engine times its steps (a chunk's per token) and uses the
count whose recent steps were fastest.

When the others are tried: once the first count's first `trial` steps were
timed; as soon as the chosen count's recent steps run SLOWER times slower
than when it was chosen, or two in a row FAR times slower (the load came);
and every TRY_EVERY steps (the load may have gone). A trial lasts `trial` steps, or ends after two in a
row each FAR times slower than the chosen count's (a spinning count on a
busy machine can take a second a token: a whole trial of it would stall the
person for seconds). A count that keeps losing that badly is tried half as
often each time, down to once in MOST_SPACED * TRY_EVERY steps. A
configured count is kept as it is. The count never changes the tokens:
llama.cpp splits a product's rows between threads, each summed by one.
"""
from __future__ import annotations

from collections import deque

TRIAL = 8  # steps a trial of another count lasts (and the window each count is judged by), unless told
TRY_EVERY = 512  # steps between trials while the chosen count's pace holds
SLOWER = 2.0  # the chosen count this many times slower than when chosen: a trial now
FAR = 4.0  # a trial's step this many times slower than the chosen count's: hopeless if twice in a row
MOST_SPACED = 16  # a hopeless count is tried at least once in MOST_SPACED * TRY_EVERY steps


def _median(seconds: deque) -> float:
    return sorted(seconds)[len(seconds) // 2]


def _far(seconds: deque, slowest: float) -> bool:
    """The last two steps each slower than `slowest`."""
    return len(seconds) >= 2 and seconds[-1] > slowest and seconds[-2] > slowest


class ThreadChoice:
    def __init__(self, counts: tuple[int, ...], trial: int = TRIAL):
        """`counts`: the thread counts to choose among, the safest first (it
        is used until the others were timed)."""
        self.counts, self.trial = tuple(dict.fromkeys(counts)), trial
        self.best = self.counts[0]
        self._recent = {n: deque(maxlen=trial) for n in self.counts}  # each count's last steps, seconds
        self._usual: float | None = None  # the chosen count's median when it was chosen
        self._trying: int | None = None
        self._to_try: list[int] = []  # the rest of this round of trials
        self._since = 0  # steps since the last round
        self._every = TRY_EVERY
        self._due = False

    def pick(self) -> int:
        """The count for the next step."""
        if self._trying is None and len(self.counts) > 1 and (self._due or self._since >= self._every):
            self._due, self._to_try = False, [n for n in self.counts if n != self.best]
            self._next_trial()
        return self.best if self._trying is None else self._trying

    def fewer(self) -> int:
        """How many threads fewer than the most it may use the count chosen
        by timing is (0 until the first count was timed)."""
        return 0 if self._usual is None else max(self.counts) - self.best

    def record(self, threads: int, seconds: float) -> None:
        """A step decoded with `threads` (the count `pick` gave) took
        `seconds` (a token). A trial's end compares the counts' medians (a
        step the kernel preempted is one of eight), and the faster is used."""
        self._since += 1
        recent = self._recent[threads]
        recent.append(seconds)
        if threads == self._trying:
            if len(recent) == self.trial or self._hopeless(recent):
                self._next_trial()
        elif threads == self.best and self._usual is None:
            if len(recent) == self.trial:  # the first count timed: the others' turn
                self._usual, self._due = _median(recent), True
        elif threads == self.best and _far(recent, FAR * self._usual):
            self._due = True
            while len(recent) > 2:  # (its steps before the load came no longer tell)
                recent.popleft()
        elif threads == self.best:
            self._due = self._due or _median(recent) > SLOWER * self._usual

    def _hopeless(self, trial: deque) -> bool:
        return _far(trial, FAR * _median(self._recent[self.best]))

    def _next_trial(self) -> None:
        if self._to_try:
            self._trying = self._to_try.pop(0)
            self._recent[self._trying].clear()  # (a new trial: the load may have changed since the last)
            return
        self._trying = None
        timed = {n: _median(r) for n, r in self._recent.items() if len(r) == self.trial or (n == self.best and r)}
        chosen = min(timed, key=timed.__getitem__)
        lost_by_far = all(n == self.best or timed.get(n, float("inf")) > FAR * timed[self.best] for n in self.counts)
        self._every = min(2 * self._every, MOST_SPACED * TRY_EVERY) if lost_by_far else TRY_EVERY
        self.best, self._usual, self._since = chosen, timed[chosen], 0
