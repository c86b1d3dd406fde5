"""A scripted job source for route unit tests: the relay and the queue are
replaced by fakes that answer each enqueued job with queued-up events."""
from __future__ import annotations

import fakeredis
import pytest

from app import create_app
from app.relay import Subscription
from protocol.contract import encode_event


class ScriptedJobs:
    def __init__(self):
        self.replies: list[list] = []
        self.jobs = []
        self._subscriptions: dict[str, Subscription] = {}

    # The ticket is made just before the relay listens for the job's events
    # (and the job is queued): the job's reply is put on its subscription as
    # soon as it exists.
    def ticket(self, job, queue: str, pool: str) -> tuple[str, bytes]:
        self.jobs.append((job, queue))
        return "scripted-tickets", b"ticket"

    # Relay
    def listen(self, job_id: str, timeout: float) -> Subscription:
        subscription = self._subscriptions[job_id] = Subscription(job_id)
        assert self.jobs and self.jobs[-1][0].id == job_id, "the ticket comes first"
        for event in self.replies.pop(0):
            subscription.messages.put(encode_event(event))
        return subscription

    def forget(self, subscription: Subscription) -> None:
        self._subscriptions.pop(subscription.job_id, None)


@pytest.fixture
def scripted():
    app = create_app({"redis_url": "redis://unused:1/0"})
    services = app.extensions["switchboard"]
    jobs = ScriptedJobs()
    services.relay, services.ticket, services.redis = jobs, jobs.ticket, fakeredis.FakeRedis()
    jobs.client = app.test_client()
    return jobs
