"""The worker's consume loop: Celery's own, woken the moment a slot frees.

Why: with prefetch disabled (queue_config), once every slot holds a task
kombu's Redis transport stops its BRPOP, and Celery's loop for green
pools (`synloop`) waits in `drain_events(timeout=2.0)`, where kombu,
with no socket left to poll, sleeps up to a second. Nothing ends that wait
when a slot frees. Under overload a worker's slots take job after job
themselves (workers/slots.py), but when the fair queue is empty for an
instant they all end at once, and the jobs queued just after would wait
for seconds with every slot idle (docs/benchmarks-notes.md has the
measurements). Here, while the slots are full, the loop waits for a task to
end instead, and goes back to kombu's BRPOP at once.

Thread and prefork pools run Celery's other loop (`asynloop`, on kombu's
event hub; Celery 5.7 gives the thread pool a hub too). There kombu issues
its BRPOP again only when the hub comes round, and a slot freeing in a pool
thread does not bring it round: after a burst that kept every slot busy,
the tickets waiting in the queue sat, with every slot idle, until the hub's
next timer (the fairness benchmark's rounds: a colleague's job queued just
after a burst waited for that). Here a task's end wakes the hub (kombu's call_soon
is safe from any thread), and it looks again shortly until Celery counts
the slot free.
"""
from __future__ import annotations

import socket
import threading
from functools import partial
from typing import Callable

from celery.signals import task_postrun
from celery.worker import loops
from celery.worker.consumer import Consumer as CeleryConsumer

# While the slots are full the loop also looks again this often: a task ends
# (task_postrun) a moment before Celery counts its slot as free.
RECHECK_SECONDS = 0.05

_slot_freed = threading.Event()  # gevent's under a gevent pool (patched)
_wake_hub: list[Callable[[], None]] = []  # the event loop's, for a consumer on kombu's hub (the latest)
HUB_LOOKS = 20  # times the hub looks again, RECHECK_SECONDS apart, for Celery to count the freed slot


@task_postrun.connect
def _on_task_end(**_) -> None:
    _slot_freed.set()
    for wake in _wake_hub:
        wake()


def hub_waker(hub, can_consume) -> Callable[[], None]:
    """What brings kombu's event loop round from any thread: at once, then
    every RECHECK_SECONDS while the slot is not counted free yet; each time
    round, the loop's tick issues kombu's BRPOP if a slot is free."""
    def look(left: int) -> None:
        if left and not can_consume():
            hub.call_later(RECHECK_SECONDS, look, left - 1)
    return lambda: hub.call_soon(look, HUB_LOOKS)


def woken_drain(drain, can_consume, freed: threading.Event = _slot_freed):
    """`connection.drain_events` that, while the slots are full, waits for
    one to free (or the timeout) instead of in kombu's sleep, and then
    returns as a timeout does: the loop comes round and drains again."""
    def drain_events(timeout: float | None = None, **kwargs):
        freed.clear()
        if can_consume():
            return drain(timeout=timeout, **kwargs)
        freed.wait(RECHECK_SECONDS if timeout is None else min(timeout, RECHECK_SECONDS))
        raise socket.timeout()
    return drain_events


def consume_loop(*loop_args, **loop_kwargs):
    """Celery's consume loop, called with its loop arguments (the consumer
    object, connection, consumer, blueprint, hub, qos, ...)."""
    _, connection, consumer, _, hub, *_ = loop_args
    if hub is not None:
        _wake_hub[:] = [hub_waker(hub, consumer.channel.qos.can_consume)]
        return loops.asynloop(*loop_args, **loop_kwargs)
    connection.drain_events = woken_drain(connection.drain_events, consumer.channel.qos.can_consume)
    return loops.synloop(*loop_args, **loop_kwargs)


# After losing the broker (a Redis restart, a Sentinel failover) the consumer
# tries again this often: kombu's default waits 2, 4, 6 ... up to 30 s, so a
# Redis back (or a replica promoted) after two seconds was consumed from
# again only after six, and tickets waited for it meanwhile.
RECONNECT_EVERY = {"interval_start": 0.25, "interval_step": 0.25, "interval_max": 1.0}


class Consumer(CeleryConsumer):
    """Celery's consumer with the loop above (queue_config: worker_consumer),
    reconnecting within a second of the broker's return."""
    loop = staticmethod(consume_loop)

    def ensure_connected(self, conn):
        conn.ensure_connection = partial(conn.ensure_connection, **RECONNECT_EVERY)
        return super().ensure_connected(conn)
