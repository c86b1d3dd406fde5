"""A scripted job source for route unit tests: the relay and the queue are
replaced by fakes that answer each submitted job with queued-up events."""
from __future__ import annotations

import fakeredis
import pytest

import jobqueue
from app import create_app
from app.record_buffer import RecordBuffer
from app.relay import Subscription
from protocol.events import encode_event
from protocol.queue import ticket_queue


class ScriptedJobs:
    def __init__(self):
        self.replies: list[list] = []
        self.jobs = []  # (job, the Celery queue its ticket went to)
        self._subscriptions: dict[str, Subscription] = {}

    # The queue: the job is submitted once the relay listens; its reply is
    # put on its subscription then.
    def submit(self, redis, job, waiting, limits, where: jobqueue.Placement, send_ticket) -> None:
        assert job.id in self._subscriptions, "the relay listens first"
        self.jobs.append((job, ticket_queue(where.pool, where.job_class)))
        for event in self.replies.pop(0):
            self._subscriptions[job.id].messages.put(encode_event(event))

    # Relay
    def listen(self, job_id: str, timeout: float) -> Subscription:
        subscription = self._subscriptions[job_id] = Subscription(job_id, "web")
        return subscription

    def forget(self, subscription: Subscription) -> None:
        self._subscriptions.pop(subscription.job_id, None)


@pytest.fixture
def scripted(monkeypatch):
    app = create_app({"redis_url": "redis://unused:1/0"})
    services = app.extensions["switchboard"]
    jobs = ScriptedJobs()
    services.relay, services.redis = jobs, fakeredis.FakeRedis()
    services.records = RecordBuffer(services.redis, services.settings)  # (the request log on the same fake)
    monkeypatch.setattr(jobqueue, "submit", jobs.submit)
    jobs.client = app.test_client()
    return jobs
