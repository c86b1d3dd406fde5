"""jobqueue.submit on a real Redis with the web process's Wakeups: admitted,
queued, and a ticket sent beside the queueing while the queue's jobs need
one, else after it only when none on its way will wake a slot; a ticket that
overtook its job is sent again; one that cannot be sent withdraws the job.
And Celery's message for a wake-up (jobqueue/wakeups.py)."""
from __future__ import annotations

import json
import time
import uuid

import gevent
import pytest

import jobqueue
from jobqueue import fairqueue
from jobqueue.wakeups import Wakeups
from protocol import keys
from protocol.contract import Job, Message
from protocol.errors import SwitchboardError

LIMITS = jobqueue.Limits(requests_per_minute=100, max_queue=10, stale_after=60)


def _job(web: str) -> Job:
    return Job(id=uuid.uuid4().hex, model="echo", messages=[Message(role="user", content="hi")], web_id=web,
               expires_at=time.time() + 60)


def _submit(redis, job, person: str, pool: str, tickets) -> None:
    jobqueue.submit(redis, job, jobqueue.Asker(person, 4), LIMITS, jobqueue.Placement(pool), tickets)


def _recording(sent: list) -> Wakeups:
    """The web process's Wakeups, publishing into `sent`."""
    return Wakeups(gevent.spawn, lambda batch: sent.extend((queue, job_id) for queue, _, job_id in batch))


def test_tickets_go_beside_the_queueing_while_jobs_need_them_else_only_when_needed(clean_redis, web):
    pool, sent = f"p-{uuid.uuid4().hex[:6]}", []
    tickets = _recording(sent)
    first, second = _job(web), _job(web)
    _submit(clean_redis, first, "alice", pool, tickets)
    _submit(clean_redis, second, "bob", pool, tickets)
    assert sent == [(pool, first.id), (pool, second.id)]
    taken = jobqueue.take(clean_redis, pool, "w", want=first.id, ticket_from=pool)
    jobqueue.finish_and_take(clean_redis, taken.person, taken.lease, pool, "w")  # bob's taken without his ticket
    third, fourth = _job(web), _job(web)
    _submit(clean_redis, third, "carol", pool, tickets)  # sent beside, as the jobs before needed one ...
    assert sent[2:] == [(pool, third.id)]
    _submit(clean_redis, fourth, "dave", pool, tickets)  # ... but hers was not needed: none for dave, two are on their way
    assert sent[3:] == [] and clean_redis.zcard(keys.tickets_key(pool)) == 2


def test_a_ticket_that_overtook_its_job_is_sent_again(clean_redis, web):
    """A slot took the ticket sent beside before the job was queued (a large
    prompt's write can let it): the take marks it, and the queueing asks for
    another."""
    pool, job = f"p-{uuid.uuid4().hex[:6]}", _job(web)

    class Overtaken(Wakeups):
        def beside(self, queue, pool, job_id):
            assert jobqueue.take(clean_redis, pool, "w", want=job_id, ticket_from=queue).job is None
            return lambda: None
    sent = []
    tickets = Overtaken(gevent.spawn, lambda batch: sent.extend(job_id for _, _, job_id in batch))
    _submit(clean_redis, job, "alice", pool, tickets)
    assert sent == [job.id] and clean_redis.zcard(keys.tickets_key(pool)) == 1
    assert jobqueue.take(clean_redis, pool, "w", want=job.id, ticket_from=pool).job.id == job.id


def test_a_ticket_that_cannot_be_sent_withdraws_the_job(clean_redis, web):
    pool, job = f"p-{uuid.uuid4().hex[:6]}", _job(web)

    def broker_down(batch):
        raise ConnectionError("broker down")
    with pytest.raises(SwitchboardError, match="the job queue is unavailable: broker down") as refused:
        _submit(clean_redis, job, "alice", pool, Wakeups(gevent.spawn, broker_down))
    assert (refused.value.status, refused.value.retry_after) == (503, 1)  # retryable, as a client reads it
    assert fairqueue.depth(clean_redis, pool) == 0 and clean_redis.zcard(keys.queued_key(pool)) == 0
    assert clean_redis.zcard(keys.tickets_key(pool)) == 0


def test_a_job_a_worker_took_while_its_ticket_failed_is_not_refused(clean_redis, web):
    """The broker failed this job's ticket (Redis restarting), but a slot
    another ticket woke took the job first: it runs, so its client is not
    told of an error (and then counted an answer it never got)."""
    pool, job = f"p-{uuid.uuid4().hex[:6]}", _job(web)
    taken = []

    def taken_then_broker_down(batch):
        taken.append(jobqueue.take(clean_redis, pool, "w", want=job.id))
        raise ConnectionError("broker down")
    _submit(clean_redis, job, "alice", pool, Wakeups(gevent.spawn, taken_then_broker_down))
    assert taken[0].job.id == job.id and clean_redis.zcard(keys.tickets_key(pool)) == 0
    assert clean_redis.zscore(keys.active_key("alice"), taken[0].lease) is not None  # its slot still held


def test_tickets_sent_while_a_batch_is_on_its_way_go_in_the_next_one():
    """Another request's greenlet sending while this one waits on Redis
    (here: during the publish itself) leaves its ticket for this greenlet's
    next batch instead of a round trip of its own."""
    batches = []

    def publish(batch):
        batches.append(batch)
        if len(batches) == 1:
            tickets.send("local", "local", "job-2")
            tickets.send("local", "local", "job-3")
    tickets = Wakeups(gevent.spawn, publish)
    tickets.send("local", "local", "job-1")
    assert batches == [[("local", "local", "job-1")], [("local", "local", "job-2"), ("local", "local", "job-3")]]


def test_a_batch_that_fails_fails_its_sender_and_the_next_ticket_still_goes():
    sent = []

    def publish(batch):
        if not sent:
            sent.append("failed")
            raise ConnectionError("broker down")
        sent.append(batch)
    tickets = Wakeups(gevent.spawn, publish)
    with pytest.raises(ConnectionError):
        tickets.send("local", "local", "job-1")
    tickets.send("local", "local", "job-2")
    assert sent == ["failed", [("local", "local", "job-2")]]


def _celery_messages(broker, queue: str) -> list[dict]:
    import base64
    messages = [json.loads(m) for m in broker.lrange(queue, 0, -1)]
    return [{"task": m["headers"]["task"], "ticket": json.loads(base64.b64decode(m["body"]))[0][0]} for m in messages]


@pytest.fixture
def broker_queue():
    """A Celery queue of its own on the test broker, removed after."""
    import redis

    from queue_config import app
    queue, broker = f"switchboard-test-tickets-{uuid.uuid4().hex[:6]}", redis.Redis.from_url(app.conf.broker_url)
    yield broker, queue
    broker.delete(queue, *broker.keys(f"_kombu.binding*{queue}"))


def test_a_ticket_through_celery_is_a_take_task_for_the_queue(broker_queue):
    """jobqueue.wakeups: Celery's message for the take task, on the named
    queue (a list kombu pushes), the ticket as its argument."""
    from protocol.queue import TAKE_TASK
    from jobqueue.wakeups import HeldProducer
    broker, queue = broker_queue
    held = HeldProducer()
    held.send([(queue, "local", "job-1"), (queue, "local", "job-2")])  # a batch
    held.send([(queue, "local", "job-3")])  # one alone
    messages = _celery_messages(broker, queue)
    assert [m["task"] for m in messages] == [TAKE_TASK] * 3
    assert sorted(m["ticket"]["job"] for m in messages) == ["job-1", "job-2", "job-3"]
    assert messages[0]["ticket"] == {"pool": "local", "job": messages[0]["ticket"]["job"], "queue": queue}


def test_a_ticket_is_the_message_celerys_own_api_builds(broker_queue):
    """Sent with kombu alone, a ticket is what Celery's app would have sent:
    its worker takes it as its own (all but the delivery tag, new each time)."""
    from queue_config import app
    from jobqueue.wakeups import HeldProducer
    from protocol.queue import TAKE_TASK
    broker, queue = broker_queue
    body = {"pool": "local", "job": "job-1", "queue": queue}
    message = app.amqp.create_task_message("job-1", TAKE_TASK, [body], {}, argsrepr=repr(body), kwargsrepr="{}",
                                           ignore_result=True)
    with app.producer_pool.acquire(block=True) as producer:
        app.amqp.send_task_message(producer, TAKE_TASK, message, queue=queue, retry=False, declare=[])
    HeldProducer().send([(queue, "local", "job-1")])
    celerys, ours = (json.loads(raw) for raw in broker.lrange(queue, 0, -1)[::-1])
    for sent in (celerys, ours):
        assert sent["properties"].pop("delivery_tag")
    assert ours == celerys


def test_the_web_process_sends_tickets_without_loading_celery(broker_queue):
    from tests.unit.own_process import run_apart
    broker, queue = broker_queue
    found = run_apart(f"import json, sys\nfrom jobqueue.wakeups import HeldProducer\n"
                      f"HeldProducer().send([({queue!r}, 'local', 'job-1')])\n"
                      f"print(json.dumps({{'celery': sorted(m for m in sys.modules if m.split('.')[0] == 'celery')}}))")
    assert found == {"celery": []}
    assert [m["ticket"]["job"] for m in _celery_messages(broker, queue)] == ["job-1"]


def test_a_held_producer_connects_anew_after_a_failure(broker_queue, monkeypatch):
    from jobqueue import wakeups
    broker, queue = broker_queue
    held, publish = wakeups.HeldProducer(), wakeups.publish_task
    held.send([(queue, "local", "job-1")])
    first = held._connection

    def broken(*args):
        raise ConnectionError("broker down")
    monkeypatch.setattr(wakeups, "publish_task", broken)
    with pytest.raises(ConnectionError):
        held.send([(queue, "local", "job-2")])
    assert held._producer is None and held._connection is None
    monkeypatch.setattr(wakeups, "publish_task", publish)
    held.send([(queue, "local", "job-3")])
    assert held._connection is not None and held._connection is not first  # connected anew
    assert [m["ticket"]["job"] for m in _celery_messages(broker, queue)] == ["job-3", "job-1"]
