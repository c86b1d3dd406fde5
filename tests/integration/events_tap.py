"""Listen to every Switchboard pub/sub message, with arrival times, to see
from outside what workers publish and when aborts are sent."""
from __future__ import annotations

import json
import threading
import time

import redis

from protocol.keys import abort_channel, channels_prefix, events_channel_pattern, job_of_channel


class EventsTap:
    def __init__(self, redis_url: str):
        self._client = redis.Redis.from_url(redis_url)
        self._pubsub = self._client.pubsub(ignore_subscribe_messages=True)
        self._prefix = channels_prefix(redis_url)  # of the Redis it listens to
        self._pubsub.psubscribe(events_channel_pattern(self._prefix))
        self._pubsub.subscribe(abort_channel(self._prefix))
        self.messages: list[tuple[float, str, bytes]] = []
        self._running = True
        for _ in range(2):
            self._pubsub.get_message(timeout=1)  # the two confirmations
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while self._running:
            message = self._pubsub.get_message(timeout=0.05)
            if message:
                self.messages.append((time.monotonic(), message["channel"].decode(), message["data"]))

    def aborts(self) -> list[tuple[float, str]]:
        return [(t, data.decode()) for t, channel, data in self.messages if channel == abort_channel(self._prefix)]

    def events(self, job_id: str) -> list[tuple[float, dict]]:
        return [(t, json.loads(data)) for t, ch, data in self.messages
                if ch != abort_channel(self._prefix) and job_of_channel(ch) == job_id]

    def wait_for_channel(self, containing: bytes, timeout: float = 5) -> str:
        """The channel of the first message whose data contains `containing`,
        once the tap's thread has heard it (a client may have its reply
        before then)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = next((ch for _, ch, data in list(self.messages) if containing in data), None)
            if found is not None:
                return found
            time.sleep(0.01)
        raise AssertionError(f"no message with {containing!r} was published")

    def wait_for_abort(self, timeout: float = 5) -> tuple[float, str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.aborts():
                return self.aborts()[0]
            time.sleep(0.01)
        raise AssertionError("no abort was sent")

    def close(self) -> None:
        self._running = False
        self._thread.join(1)
        self._pubsub.close()
        self._client.close()
