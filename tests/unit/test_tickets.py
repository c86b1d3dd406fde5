"""The ticket the web process queues with a job (queue_config.ticket_message)
is the message kombu itself would push: the same envelope on the same list,
so a Celery worker consumes it as its own."""
from __future__ import annotations

import json

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
