"""How a queued job wakes a worker slot: the one module that knows Celery is
the transport under the job queue.

A wake-up is a Celery task message ("a free slot of pool P may take a job":
the fair queue decides which, fairqueue.py), sent by task name on the
pool's Celery queue (a job's class picks the pool's completion queue,
polled first), or on a worker's own queue for a job handed to it. The web
process sends one per job it queues (Wakeups: on one connection held for
the process, those of requests submitted together in one round trip, and
beside the job's queueing while slots are idle, so that the wake-up costs
the request no round trip of its own). A worker sends them for jobs that
waited on their person's limit or were handed to another worker (wake).

The message is Celery's own (its task protocol 2, as its app builds it),
sent with kombu, Celery's messaging library, on the broker options its app
uses (broker_transport.py): the web process never loads Celery's app (some
5 MB resident), and a worker's Celery cannot tell the two apart (a unit test
compares them). A worker sends through its Celery app's producer pool.
"""
from __future__ import annotations

import os
import socket
import uuid
from functools import cache
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


def _broker_connection():
    from broker_transport import broker_connection  # (kombu's, as Celery's app connects)
    return broker_connection()


def _celery():
    from queue_config import app  # (Celery's app: loaded by a worker's first wake-up)
    return app


def send_batch(messages: list[Message], producer) -> None:
    """Wake-ups for jobs the web process queued, in one round trip (kombu's
    publish batch, when there are several): a free slot that gets one takes
    the fairest job of its pool it may run (its job first if it may) and
    tells the job queue it arrived (fairqueue.py). Raises what kombu raises
    when the broker is down."""
    if len(messages) == 1:
        return _publish_counted(producer, *messages[0])
    with producer.batch():
        for message in messages:
            _publish_counted(producer, *message)


class HeldProducer:
    """A connection to the broker and its producer, held by a process that
    sends from one place at a time (the web process's Wakeups). After a
    failure the connection is closed, and the next send makes one anew."""

    def __init__(self) -> None:
        self._connection = self._producer = None

    def send(self, messages: list[Message]) -> None:
        if self._producer is None:
            self._connection = _broker_connection()
            self._producer = self._connection.Producer()
        try:
            send_batch(messages, self._producer)
        except BaseException:
            connection, self._connection, self._producer = self._connection, None, None
            connection.release()
            raise


def _publish_counted(producer, queue: str, pool: str, job_id: str) -> None:
    publish_task(producer, queue, job_id, {"pool": pool, "job": job_id, "queue": queue})


def wake(pool: str, job_id: str = "", worker: str = "") -> None:
    """A wake-up from a worker: for a person's jobs of the pool that waited
    on their limit, or (`worker`) on another worker's own queue, for a job
    handed to its idle model. The job queue does not count these."""
    queue = direct_queue(worker) if worker else pool
    with _celery().producer_pool.acquire(block=True) as producer:
        publish_task(producer, queue, uuid.uuid4().hex, {"pool": pool, "job": job_id})


_EMBED = {"callbacks": None, "errbacks": None, "chain": None, "chord": None}  # no workflow around the task


def publish_task(producer, queue: str, task_id: str, body: dict, task: str = TAKE_TASK) -> None:
    """Celery's message for the task (what its app's amqp.create_task_message
    builds: results ignored, events travel over pub/sub), its one argument
    `body`, sent to the queue by name (kombu's anonymous exchange), so
    nothing is declared first: the workers declare the queues they consume."""
    headers = {"lang": "py", "task": task, "id": task_id, "shadow": None, "eta": None, "expires": None,
               "group": None, "group_index": None, "retries": 0, "timelimit": [None, None], "root_id": task_id,
               "parent_id": None, "argsrepr": repr(body), "kwargsrepr": "{}", "origin": _origin(),
               "ignore_result": True, "replaced_task_nesting": 0, "stamped_headers": None, "stamps": {}}
    producer.publish([[body], {}, _EMBED], routing_key=queue, exchange="", serializer="json", headers=headers,
                     correlation_id=task_id, reply_to="", delivery_mode=2, retry=False, declare=[])


def _origin() -> str:
    """Who sent it, as Celery names a process that is not a worker."""
    return f"gen{os.getpid()}@{_hostname()}"


@cache
def _hostname() -> str:
    return socket.gethostname()
