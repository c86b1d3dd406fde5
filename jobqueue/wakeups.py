"""How a queued job wakes a worker slot: the one module that knows Celery is
the transport under the job queue.

A wake-up is a Celery task message ("a free slot of pool P may take a job":
the fair queue decides which, fairqueue.py), sent by task name on the
pool's Celery queue (a job's class picks the pool's completion queue,
polled first), or on a worker's own queue for a job handed to it. The web
process sends one per job it queues (Wakeups: on one producer held for the
process, those of requests submitted together in one round trip, and
beside the job's queueing while slots are idle, so that the wake-up costs
the request no round trip of its own). A worker sends them for jobs that
waited on their person's limit or were handed to another worker (wake).

The Celery app is imported on first use: a process that only reads the
job queue (the admin tool) never loads it.
"""
from __future__ import annotations

import uuid
from typing import Callable, Protocol

from protocol.queue import TAKE_TASK, direct_queue

Message = tuple[str, str, str]  # the Celery queue, the pool, the job (the message's id)


class Spawned(Protocol):
    def get(self) -> object:
        """The function's result, once it ran."""


class Wakeups:
    """The web process's sender. `spawn` runs a function concurrently (the
    web's gevent.spawn); `publish` sends a batch (tests pass their own)."""

    def __init__(self, spawn: Callable[..., Spawned], publish: Callable[[list[Message]], None] | None = None):
        self._spawn = spawn
        self._publish = publish or HeldProducer().send
        self._pending: list[Message] = []
        self._sending = False
        self._needed: dict[str, bool] = {}  # per Celery queue: whether its last job needed a wake-up

    def send(self, queue: str, pool: str, job_id: str) -> None:
        """Send it now, or, while this process's greenlet sending wake-ups
        waits on Redis, leave it for that greenlet's next batch: under load,
        many requests' wake-ups go in one round trip. The caller whose
        greenlet sends hears a failure (its message in the batch); one left
        to another's batch that fails is lost, and a free worker forgets it
        within seconds (forget_lost)."""
        self._pending.append((queue, pool, job_id))
        if self._sending:
            return
        self._sending = True
        try:
            while self._pending:
                batch, self._pending = self._pending, []
                self._publish(batch)
        finally:
            self._sending = False

    def beside(self, queue: str, pool: str, job_id: str) -> Callable[[], None] | None:
        """If the queue's last job needed a wake-up, send this one
        concurrently, which runs once the caller waits on Redis: the job's
        queueing is written first, and the message goes out while Redis runs
        it (a slot woken before the job is queued leaves a mark, and the
        queueing asks for another: jobqueue.submit). Returns what waits for
        the send and raises its error; None if not sent."""
        if not self._needed.get(queue, True):
            return None
        sending = self._spawn(self._send_catching, queue, pool, job_id)

        def wait() -> None:
            error = sending.get()
            if error is not None:
                raise error
        return wait

    def learn(self, queue: str, needed: bool) -> None:
        self._needed[queue] = needed

    def _send_catching(self, queue: str, pool: str, job_id: str) -> Exception | None:
        """The send's error as its result: a refused job's wake-up is never
        waited for, and its failure is not worth a traceback."""
        try:
            self.send(queue, pool, job_id)
        except Exception as error:
            return error
        return None


def _celery():
    from queue_config import app  # (Celery's app: loaded by the first process that sends)
    return app


def send_batch(messages: list[Message], producer=None) -> None:
    """Wake-ups for jobs the web process queued, in one round trip (kombu's
    publish batch, when there are several): a free slot that gets one takes
    the fairest job of its pool it may run (its job first if it may) and
    tells the job queue it arrived (fairqueue.py). On `producer`, else on one
    from Celery's pool. Raises what kombu raises when the broker is down."""
    if producer is None:
        with _celery().producer_pool.acquire(block=True) as producer:
            return send_batch(messages, producer)
    if len(messages) == 1:
        return _publish_counted(producer, *messages[0])
    with producer.batch():
        for message in messages:
            _publish_counted(producer, *message)


class HeldProducer:
    """One producer of Celery's pool, held by a process that sends from one
    place at a time (the web process's Wakeups), instead of taking it from
    the pool and giving it back for every message. After a failure it goes
    back to the pool, and the next send takes one anew."""

    def __init__(self) -> None:
        self._producer = None

    def send(self, messages: list[Message]) -> None:
        if self._producer is None:
            self._producer = _celery().producer_pool.acquire(block=True)
        try:
            send_batch(messages, self._producer)
        except BaseException:
            producer, self._producer = self._producer, None
            producer.release()
            raise


def _publish_counted(producer, queue: str, pool: str, job_id: str) -> None:
    _publish(producer, queue, job_id, {"pool": pool, "job": job_id, "queue": queue})


def wake(pool: str, job_id: str = "", worker: str = "") -> None:
    """A wake-up from a worker: for a person's jobs of the pool that waited
    on their limit, or (`worker`) on another worker's own queue, for a job
    handed to its idle model. The job queue does not count these."""
    queue = direct_queue(worker) if worker else pool
    with _celery().producer_pool.acquire(block=True) as producer:
        _publish(producer, queue, uuid.uuid4().hex, {"pool": pool, "job": job_id})


def _publish(producer, queue: str, task_id: str, body: dict) -> None:
    """Celery's message for the task (its API's steps, without send_task's
    result object: results are ignored; events travel over pub/sub). Sent
    to the queue by name (Celery's anonymous exchange), so nothing is
    declared first: the workers declare the queues they consume."""
    app = _celery()
    message = app.amqp.create_task_message(task_id, TAKE_TASK, [body], {}, argsrepr=repr(body), kwargsrepr="{}",
                                           ignore_result=True)
    app.amqp.send_task_message(producer, TAKE_TASK, message, queue=queue, retry=False, declare=[])
