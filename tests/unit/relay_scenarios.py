"""Scenarios for app.relay, run in a gevent-patched process (as gunicorn's
gevent worker runs the relay): `python relay_scenarios.py NAME REDIS_URL`.
test_relay.py runs each one; a failed assertion exits non-zero."""
from gevent import monkey

monkey.patch_all()

import sys  # noqa: E402
import uuid  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import redis  # noqa: E402

from app.relay import CLOSED, Relay  # noqa: E402


NAME = f"relay-test-{uuid.uuid4().hex[:8]}"  # other processes may share this Redis


def _relay(url: str) -> tuple[Relay, redis.Redis]:
    client = redis.Redis.from_url(url, client_name=NAME)
    return Relay(client), client


def delivers_to_the_subscribed_channel_only(url: str) -> None:
    relay, client = _relay(url)
    mine = relay.subscribe("switchboard:job:a:events", 5)
    relay.confirm(mine, 5)
    other = relay.subscribe("switchboard:job:b:events", 5)
    relay.confirm(other, 5)
    client.publish("switchboard:job:a:events", b"one")
    client.publish("switchboard:job:b:events", b"two")
    assert mine.messages.get(timeout=5) == b"one" and other.messages.get(timeout=5) == b"two"
    assert mine.messages.empty() and relay.stream_count == 3  # two streams and the relay's own channel
    relay.unsubscribe(other)
    client.publish("switchboard:job:b:events", b"lost")
    client.publish("switchboard:job:a:events", b"three")
    assert mine.messages.get(timeout=5) == b"three" and other.messages.empty()


def shares_one_connection(url: str) -> None:
    relay, client = _relay(url)
    for n in range(20):
        relay.confirm(relay.subscribe(f"switchboard:job:{n}:events", 5), 5)
    pubsub_clients = [c for c in client.client_list() if c["name"] == NAME and int(c.get("sub", 0)) > 0]
    assert len(pubsub_clients) == 1 and int(pubsub_clients[0]["sub"]) == 21, pubsub_clients


def ends_every_stream_when_redis_drops_it_and_recovers(url: str) -> None:
    relay, client = _relay(url)
    waiting = relay.subscribe("switchboard:job:c:events", 5)
    relay.confirm(waiting, 5)
    for connection in client.client_list():
        if connection["name"] == NAME and int(connection.get("sub", 0)) > 0:
            client.client_kill_filter(_id=connection["id"])
    assert waiting.messages.get(timeout=5) is CLOSED
    fresh = relay.subscribe("switchboard:job:d:events", 5)  # a new reader on a new connection
    relay.confirm(fresh, 5)
    client.publish("switchboard:job:d:events", b"back")
    assert fresh.messages.get(timeout=5) == b"back"


if __name__ == "__main__":
    globals()[sys.argv[1]](sys.argv[2])
    print("ok")
