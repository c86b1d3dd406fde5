"""The ticket the web process queues with a job (queue_config.ticket_message)
is the message kombu itself would push: the same envelope on the same list,
so a Celery worker consumes it as its own."""
from __future__ import annotations

import base64
import json

import pytest
from kombu.serialization import dumps

from queue_config import _task_message
from queue_config import app, publish_ticket, ticket_message

QUEUE = "switchboard:test-tickets"


def _without_delivery_tag(envelope: dict) -> dict:
    """kombu gives every message a fresh delivery tag (a uuid)."""
    properties = {k: v for k, v in envelope["properties"].items() if k != "delivery_tag"}
    return {**envelope, "properties": properties}


def test_the_ticket_is_the_message_kombu_pushes(clean_redis, redis_url):
    with app.connection_for_write(redis_url) as connection, app.amqp.Producer(connection) as producer:
        publish_ticket(producer, QUEUE, "local", "job-1", "message-1")
    pushed = json.loads(clean_redis.lpop(QUEUE))
    clean_redis.delete(*clean_redis.keys(f"_kombu.binding*{QUEUE}"))  # kombu declared the queue
    queue, ours = ticket_message(QUEUE, "local", "job-1", "message-1")
    assert queue == QUEUE
    assert _without_delivery_tag(json.loads(ours)) == _without_delivery_tag(pushed)
    assert json.loads(ours)["properties"]["delivery_tag"] != pushed["properties"]["delivery_tag"]


def _uncached(queue: str, pool: str, job_id: str, message_id: str) -> dict:
    """The ticket built from scratch, as Celery and kombu build each message."""
    headers, properties, body, _ = _task_message(pool, job_id, message_id)
    content_type, encoding, data = dumps(body, serializer="json")
    return {"body": base64.b64encode(data.encode()).decode(), "content-encoding": encoding,
            "content-type": content_type, "headers": headers,
            "properties": {**properties, "delivery_mode": 2, "delivery_info": {"exchange": "", "routing_key": queue},
                           "priority": 0, "body_encoding": "base64", "delivery_tag": "-"}}


@pytest.mark.parametrize("pool, job_id, message_id", [
    ("local", "0123456789abcdef0123456789abcdef", "0123456789abcdef0123456789abcdef"),
    ("upstream", "job-2", "message-2"),
    ("local", 'a "quoted" \\ id', "é"),
], ids=["the-web-process", "ids-differ", "ids-needing-escapes"])
def test_a_ticket_from_the_pools_template_is_the_message_built_from_scratch(pool, job_id, message_id):
    _, ticket = ticket_message(QUEUE, pool, job_id, message_id)
    ours = json.loads(ticket)
    ours["properties"]["delivery_tag"] = "-"
    assert ours == _uncached(QUEUE, pool, job_id, message_id)


def test_each_ticket_has_its_own_delivery_tag():
    tags = {json.loads(ticket_message(QUEUE, "local", "j", "j")[1])["properties"]["delivery_tag"] for _ in range(3)}
    assert len(tags) == 3
