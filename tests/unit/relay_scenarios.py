"""Scenarios for app.relay, run in a gevent-patched process (as gunicorn's
gevent worker runs the relay): `python relay_scenarios.py NAME REDIS_URL`.
test_relay.py runs each one; a failed assertion exits non-zero."""
from gevent import monkey

monkey.patch_all()

import sys  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import redis  # noqa: E402

from app.relay import CLOSED, Relay  # noqa: E402
from protocol.keys import configure, reply_channel  # noqa: E402


NAME = f"relay-test-{uuid.uuid4().hex[:8]}"  # other processes may share this Redis


def _relay(url: str, web_id: str = "") -> tuple[Relay, redis.Redis]:
    # Channels named as for a database no test uses: pub/sub is server-wide, and
    # another test's event tap (every reply channel of its database) must not count.
    configure(url.rsplit("/", 1)[0] + "/11")
    client = redis.Redis.from_url(url, client_name=NAME)
    return Relay(client, web_id or uuid.uuid4().hex), client


def delivers_each_jobs_events_to_its_stream_only(url: str) -> None:
    relay, client = _relay(url)
    mine, other = relay.listen("a", 5), relay.listen("b", 5)
    client.publish(reply_channel(relay.web_id, "a"), b"one")
    client.publish(reply_channel(relay.web_id, "b"), b"two")
    assert mine.messages.get(timeout=5) == b"one" and other.messages.get(timeout=5) == b"two"
    assert mine.messages.empty() and relay.stream_count == 2
    relay.forget(other)
    client.publish(reply_channel(relay.web_id, "b"), b"lost")
    client.publish(reply_channel(relay.web_id, "a"), b"three")
    assert mine.messages.get(timeout=5) == b"three" and other.messages.empty() and relay.stream_count == 1


def hears_nothing_meant_for_another_web_process(url: str) -> None:
    relay, client = _relay(url)
    neighbour, _ = _relay(url)
    mine, theirs = relay.listen("same-id", 5), neighbour.listen("same-id", 5)
    client.publish(reply_channel(neighbour.web_id, "same-id"), b"for the neighbour")
    client.publish(reply_channel(relay.web_id, "same-id"), b"for me")
    assert mine.messages.get(timeout=5) == b"for me" and mine.messages.empty()
    assert theirs.messages.get(timeout=5) == b"for the neighbour" and theirs.messages.empty()


def shares_one_connection_with_no_subscription_per_stream(url: str) -> None:
    relay, client = _relay(url)
    streams = [relay.listen(f"job-{n}", 5) for n in range(20)]
    pubsub_clients = [c for c in client.client_list() if c["name"] == NAME and int(c.get("psub", 0)) > 0]
    assert len(pubsub_clients) == 1, pubsub_clients
    assert int(pubsub_clients[0]["psub"]) == 1 and int(pubsub_clients[0]["sub"]) == 0, pubsub_clients
    client.publish(reply_channel(relay.web_id, "job-19"), b"last")
    assert streams[19].messages.get(timeout=5) == b"last"


def ends_every_stream_when_redis_drops_it_and_recovers(url: str) -> None:
    """A dropped connection is a gap, even when redis-py makes it again and
    resubscribes by itself (this client retries, as redis-py's default
    does): the streams end, and nobody listens under the old identity again."""
    relay, client = _relay(url)
    waiting = relay.listen("c", 5)
    old = relay.web_id
    for connection in client.client_list():
        if connection["name"] == NAME and int(connection.get("psub", 0)) > 0:
            client.client_kill_filter(_id=connection["id"])
    assert waiting.messages.get(timeout=5) is CLOSED
    assert relay.web_id != old and relay.retired == [old]
    deadline = time.monotonic() + 5  # once Redis has seen the old connection close
    while client.publish(reply_channel(old, "c"), b"lost") != 0:  # a worker then hears nobody: it stops the job
        assert time.monotonic() < deadline, "somebody still listens under the old identity"
        time.sleep(0.01)
    fresh = relay.listen("d", 5)  # a new reader on a new connection, subscribed before listen returns
    assert fresh.web_id == relay.web_id
    client.publish(reply_channel(relay.web_id, "d"), b"back")
    assert fresh.messages.get(timeout=5) == b"back"


if __name__ == "__main__":
    globals()[sys.argv[1]](sys.argv[2])
    print("ok")
