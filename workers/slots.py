"""How a worker process's slots take jobs from the fair queue
(jobqueue/fairqueue.py) and give them back.

A slot that is woken (jobqueue.wake) takes the fairest job it may run; when that job
ends, the same slot takes the next one if any waits (a ticket is "a slot may
take a job", and a finished job frees a slot), so a job skipped for a while
(its person at their limit, its model busy here) is run as soon as it may be.

Models that run a bounded number of jobs per process (llama.cpp: its
`parallel` sequences) are tracked here: which have a free sequence in this
process, published in Redis (refreshed with the heartbeat) so that a worker
whose copy is full can hand such a job to one with room, and the person
whose prompt this process's cache now holds.
"""
from __future__ import annotations

import logging
import threading
from collections import Counter
from typing import Callable

from redis import Redis
from redis.client import Pipeline

import jobqueue
from catalog.kinds import backend_kind
from catalog.registry import Registry
from jobqueue import Taken

log = logging.getLogger(__name__)

Wake = Callable[[str, str, str], None]  # pool, job id, worker ("": any of the pool): jobqueue.wake


class Slots:
    def __init__(self, redis: Redis, worker_id: str, registry: Registry, wake: Wake):
        self._redis, self.worker_id, self._send = redis, worker_id, wake
        self._registry = registry
        bounded = [e for e in registry.entries() if backend_kind(e.backend).serial]
        self._capacity = {e.name: e.settings.jobs_at_once() for e in bounded}
        self._spare = {e.name: e.settings.spare_places() for e in bounded}  # (kept for a person running none)
        self._serial = sorted(self._capacity)
        # per bounded model, the people whose jobs run here and how many (its busy sequences)
        self._holders: dict[str, Counter[str]] = {model: Counter() for model in self._capacity}
        self._lock = threading.Lock()
        # Only a worker whose own process consumes its direct queue (threads,
        # gevent or solo pool; not prefork, whose children run the jobs) can
        # be handed jobs; until then it takes any job, as before.
        self.tracks_free = False
        self.stopping = False
        self._pools: list[str] = []

    def start_tracking(self, pools: set[str]) -> None:
        """Called once the worker consumes the pools' queues and its own.
        Only those pools' one-at-a-time models are tracked (and published as
        idle): no job is ever handed to a worker of another pool."""
        self._serial = [m for m in self._serial if self._registry.get(m).pool in pools]
        self._pools = sorted(pools)
        self.tracks_free = True
        self.refresh()

    def check_threads(self, threads: int) -> None:
        """Say so when the worker runs fewer jobs at once than a tracked
        model has sequences: those beyond its threads (the spare ones
        first) never run."""
        short = {m: n for m, n in self._capacity.items() if m in self._serial and n > threads > 0}
        for model, sequences in sorted(short.items()):
            log.warning("%s has %d sequences (parallel + spare) but this worker runs %d jobs at once: "
                        "start it with -c %d (WORKER_CONCURRENCY)", model, sequences, threads, sequences)

    def refresh(self) -> None:
        """With each heartbeat: this process's idle one-at-a-time models
        count as free, and jobs held for full deployments whose places a dead
        worker left are woken (no job of theirs ends to take them)."""
        if self.tracks_free:
            with self._lock:
                jobqueue.mark_free(self._redis, self.worker_id, self._idle())
        for pool in jobqueue.wake_held(self._redis, self._pools):
            self._wake(pool)

    def _idle(self) -> list[str]:
        """The bounded models with a free sequence here."""
        return [m for m in self._serial if self._running(m) < self._capacity[m]]

    def _running(self, model: str) -> int:
        return sum(self._holders[model].values())

    def _room(self) -> jobqueue.Idle:
        """The same, with their free sequences of how many, whose the busy
        ones are, and how many are spare (background work, and a person
        holding one, leave the spare ones, and at least one while others are
        at work, free for a turn: fair_take.lua)."""
        return {m: (self._capacity[m] - self._running(m), self._capacity[m], dict(self._holders[m]), self._spare[m])
                for m in self._idle()}

    def take(self, pool: str, want: str = "", ticket_from: str = "") -> Taken:
        """The fairest job this slot may run (`want` first); `ticket_from`: the
        queue of the wake-up that woke the slot, if the job queue counts it."""
        if not self._serial:  # nothing to track (an upstream worker's hundred greenlets need no lock)
            taken = jobqueue.take(self._redis, pool, self.worker_id, want, ticket_from=ticket_from)
        else:
            with self._lock:
                taken = jobqueue.take(self._redis, pool, self.worker_id, want,
                                      self._room() if self.tracks_free else None, ticket_from)
                if taken.job is not None and taken.job.model in self._capacity:  # runs now: a sequence less
                    self._holders[taken.job.model][taken.person] += 1
                    self._still_free(taken.job.model)
        self._forward(pool, taken)
        return taken

    def finish(self, pool: str, taken: Taken, take_next: bool = False, batch: Pipeline | None = None) -> Taken:
        """Free what the taken job held; with `take_next`, this slot takes the
        next job (returned; else an empty Taken). `batch`: a transaction of
        the finished job's own writes, sent first. Without one-at-a-time
        models to track, all of it goes in one round trip."""
        if take_next and not self._serial:
            blocked, following = jobqueue.finish_and_take(self._redis, taken.person, taken.lease, pool,
                                                           self.worker_id, batch)
            self._unblock(pool, blocked)
            self._forward(pool, following)
            return following
        if batch is not None:
            batch.execute()
        self._release_serial(taken)
        self._unblock(pool, jobqueue.release(self._redis, taken))
        return self.take(pool) if take_next else Taken(None)

    def _still_free(self, model: str) -> None:
        """The take unmarked this worker's copy as free; it still has room
        for another job if it runs several at once."""
        if self.tracks_free and model in self._idle():
            jobqueue.mark_free(self._redis, self.worker_id, [model])

    def _release_serial(self, taken: Taken) -> None:
        model = taken.job.model if taken.job is not None else ""
        with self._lock:
            holders = self._holders.get(model)
            if holders and holders[taken.person] > 0:
                holders[taken.person] -= 1
                if holders[taken.person] == 0:
                    del holders[taken.person]
                jobqueue.remember_cache(self._redis, model, taken, self.worker_id)
                if self.tracks_free:
                    jobqueue.mark_free(self._redis, self.worker_id, self._idle())

    def _unblock(self, pool: str, blocked: list[str]) -> None:
        """The person's jobs skipped for their limit in other pools are
        woken (in this pool, this slot takes the next job itself)."""
        for other in blocked:
            if other != pool:
                self._wake(other)

    def _forward(self, pool: str, taken: Taken) -> None:
        if taken.forward_to:
            self._wake(pool, taken.forward_job, taken.forward_to)

    def _wake(self, pool: str, job_id: str = "", worker: str = "") -> None:
        try:
            self._send(pool, job_id, worker)
        except Exception as error:  # noqa: BLE001 - the job still waits; the next slot to free takes it
            log.warning("could not wake %s: %s", worker or pool, error)
