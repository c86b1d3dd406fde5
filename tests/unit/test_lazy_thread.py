"""A helper thread that starts only once it is of use (workers/lazy_thread.py),
with real threads here and under gevent in a process of its own (as the
upstream workers run), where the publisher of a reply that came whole
starts none."""
from __future__ import annotations

import gc
import threading
import weakref

from tests.unit.own_process import run_under_gevent
from workers.lazy_thread import LazyThread


def test_with_real_threads_it_starts_at_once_and_join_waits_for_it():
    release, ran = threading.Event(), []
    thread = LazyThread(lambda: (release.wait(5), ran.append(True)))
    thread.start_soon()
    assert thread.started and not ran
    threading.Timer(0.05, release.set).start()
    thread.join()
    assert ran == [True]


def test_one_joined_before_it_started_never_runs():
    ran = []
    thread = LazyThread(lambda: ran.append(True))
    thread.join()
    thread.start_soon()
    assert not thread.started and ran == []


GEVENT_SCRIPT = r"""
import gc, json, weakref, gevent
from protocol.events import TextEvent
from workers.lazy_thread import LazyThread
from workers.publisher import EventPublisher

class Recorder:
    def __init__(self): self.published = []
    def publish(self, channel, data): self.published.append(data)
    def pipeline(self, transaction=False): return self
    def execute(self): return []

found = {}
ran = []
thread = LazyThread(lambda: ran.append(True))
thread.start_soon()
found["started_before_yielding"] = thread.started
thread.join()  # the caller never let it run: it never will
gevent.sleep(0)
found["ran_after_join"] = bool(ran)

thread = LazyThread(lambda: ran.append(True))
thread.start_soon()
gevent.sleep(0)  # the caller lets others run: now it starts
thread.join()
found["ran_once_yielded"] = ran == [True]

whole = EventPublisher(Recorder(), "c", 0.0)
for word in ("a", "b", "c"):
    whole.put([TextEvent(text=word)])
left = whole.close()
found["whole_reply"] = {"published": len(whole._redis.published), "left": [e.text for e in left],
                        "thread": whole._thread.started}

paced = EventPublisher(Recorder(), "c", 0.0)
paced.put([TextEvent(text="first")])
gevent.sleep(0.01)  # waiting for the next token: the first goes out meanwhile
paced.put([TextEvent(text="second")])
left = paced.close()
found["paced_reply"] = {"published": len(paced._redis.published), "left": [e.text for e in left]}

gc.disable()  # what is left for the collector stays: only reference counting frees
kept = [weakref.ref(whole), weakref.ref(paced)]
del whole, paced
gevent.sleep(0.01)
found["kept_after_close"] = sum(ref() is not None for ref in kept)
print(json.dumps(found))
"""


def test_under_gevent_it_starts_when_the_caller_lets_others_run():
    found = run_under_gevent(GEVENT_SCRIPT)
    assert found["started_before_yielding"] is False and found["ran_after_join"] is False
    assert found["ran_once_yielded"] is True
    # A reply that came whole: no thread, no message; all of it goes with the final event.
    assert found["whole_reply"] == {"published": 0, "left": ["abc"], "thread": False}
    # A paced one: its first token went out while the producer waited for the next.
    assert found["paced_reply"]["published"] >= 1
    # Closed, neither is in a cycle with its thread: a job's objects go with it, not at the next collection.
    assert found["kept_after_close"] == 0


def test_a_thread_lets_go_of_its_target_once_it_ran_or_never_will():
    class Holder:  # a target that is the holder's own method: a cycle while the thread holds it
        def __init__(self):
            self.thread = LazyThread(self.work)

        def work(self):
            pass
    ran, never = Holder(), Holder()
    ran.thread.start_soon()
    ran.thread.join()
    never.thread.join()
    gc.disable()
    try:
        kept = [weakref.ref(ran), weakref.ref(never)]
        del ran, never
        assert [ref() for ref in kept] == [None, None]
    finally:
        gc.enable()
