"""workers/backends/routed.py with scripted servers and a real Redis: a
failure of the server before the first piece moves the request on; one of
the request, or one after the first piece, does not."""
from __future__ import annotations

import json
import threading
import time

import pytest

from catalog.registry import parse_entry
from protocol import keys
from protocol.contract import Job, Message
from protocol.events import FinishReason
from protocol.errors import BackendError
from tests.integration.waits import wait_until
from tests.unit.generators import drained
from workers.backends.routed import RoutedUpstream, affinity_of, server_failed, waits_for
from workers.model_output import Outcome


class Scripted:
    """A deployment's backend whose replies are queued up front: a list of
    pieces, an error raised at once, or pieces then an error."""

    def __init__(self, *replies):
        self.replies, self.calls = list(replies), 0
        self.settings = type("S", (), {"first_token_timeout": 5, "connect_timeout": 1})()

    def generate(self, job, cancel=None):
        self.calls += 1
        reply = self.replies.pop(0)
        pieces, error = (reply, None) if isinstance(reply, list) else reply if isinstance(reply, tuple) else ([], reply)
        for piece in pieces:
            yield piece
        if error is not None:
            raise error
        return Outcome(FinishReason.STOP, 1, len(pieces))

    def healthy(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def worker(clean_redis):
    """The worker the router runs in, present (clean_redis keeps presence)."""
    clean_redis.set(keys.worker_key("w"), json.dumps({"id": "w", "queues": []}), ex=60)
    yield
    clean_redis.delete(keys.worker_key("w"))


def _router(redis, *servers) -> RoutedUpstream:
    entry = parse_entry("m", {"backend": "openai", "upstream_model": "x", "context_length": 100, "deployments": [
        {"base_url": f"http://s{n}", "name": f"s{n}"} for n in range(len(servers))]})
    return RoutedUpstream("m", entry.settings, list(servers), redis, "w")


def _run(router: RoutedUpstream, job: Job) -> tuple[list[str], Outcome]:
    return drained(router.generate(job))


JOB = Job(id="j", model="m", messages=[Message(role="user", content="hi")], usage_of="alice")


def test_a_server_failing_before_its_first_piece_passes_the_request_on(clean_redis):
    down, up = Scripted(BackendError("cannot reach upstream s0", 502)), Scripted(["Hel", "lo"])
    router = _router(clean_redis, down, up)
    clean_redis.set(keys.deployment_affinity_key("m", "person:alice"), "s0")  # s0 is tried first
    assert _run(router, JOB)[0] == ["Hel", "lo"]
    assert (down.calls, up.calls) == (1, 1)
    assert clean_redis.pttl(keys.cooldown_key("m", "s0")) > 0  # it rests
    assert clean_redis.zcard(keys.inflight_key("m", "s1")) == 0  # nothing left counted in flight


def test_a_refused_request_fails_without_trying_another(clean_redis):
    refusing, other = Scripted(BackendError("rejected the request (HTTP 400)", 400)), Scripted(["x"])
    router = _router(clean_redis, refusing, other)
    clean_redis.set(keys.deployment_affinity_key("m", "person:alice"), "s0")
    with pytest.raises(BackendError, match="HTTP 400"):
        _run(router, JOB)
    assert other.calls == 0 and clean_redis.pttl(keys.cooldown_key("m", "s0")) < 0


def test_after_the_first_piece_a_failure_ends_the_reply(clean_redis):
    breaking, other = Scripted((["Hel"], BackendError("broke off the stream", 502))), Scripted(["x"])
    router = _router(clean_redis, breaking, other)
    clean_redis.set(keys.deployment_affinity_key("m", "person:alice"), "s0")
    stream = router.generate(JOB)
    assert next(stream) == "Hel"
    with pytest.raises(BackendError, match="broke off"):
        next(stream)
    assert other.calls == 0  # tokens are never replayed


def test_when_every_server_failed_the_last_error_is_raised(clean_redis):
    router = _router(clean_redis, Scripted(BackendError("one", 502)), Scripted(BackendError("two", 503, 1)))
    with pytest.raises(BackendError) as error:
        _run(router, JOB)
    assert error.value.message in ("one", "two")


@pytest.mark.parametrize("status, moves_on", [(502, True), (503, True), (504, True), (404, True), (429, True),
                                              (400, False), (499, False)])
def test_which_failures_are_the_servers(status, moves_on):
    assert server_failed(BackendError("x", status)) is moves_on


def test_affinity_is_the_cache_key_then_the_session_then_the_prompt_prefix_then_the_person():
    job = JOB.model_copy(update={"cache_key": "thread-1", "session": "ab" * 16})
    cache, session, prefix, person = affinity_of(job)
    assert cache.startswith("cache:") and session == "session:" + "ab" * 16 and prefix.startswith("prefix:")
    assert person == "person:alice"
    assert [name.split(":")[0] for name in affinity_of(JOB)] == ["prefix", "person"]
    longer = JOB.model_copy(update={"messages": [Message(role="user", content="hi" + "x" * 5000)]})
    same_start = JOB.model_copy(update={"messages": [Message(role="user", content="hi" + "x" * 5000 + "more")]})
    assert affinity_of(longer)[0] == affinity_of(same_start)[0]  # only the first 4,096 characters count


def test_a_conversation_past_the_prefix_keeps_its_prefix_and_an_early_change_moves_it():
    turns = [Message(role="user", content=f"turn {n} " + "y" * 1000) for n in range(10)]
    conversation = JOB.model_copy(update={"messages": turns})
    continued = JOB.model_copy(update={"messages": [*turns, Message(role="user", content="one more")]})
    edited = JOB.model_copy(update={"messages": [Message(role="user", content="edited"), *turns[1:]]})
    assert affinity_of(conversation)[0] == affinity_of(continued)[0]
    assert affinity_of(conversation)[0] != affinity_of(edited)[0]
    short = JOB.model_copy(update={"messages": turns[:1]})
    assert affinity_of(short)[0] != affinity_of(conversation)[0]  # under 4,096 characters: all of it counts


def _bounded(redis, wait: float, *servers) -> RoutedUpstream:
    """Servers of one place each, s0 holding the session's conversation and
    busy with another person's request."""
    entry = parse_entry("m", {"backend": "openai", "upstream_model": "x", "context_length": 100,
                              "affinity_wait": wait, "deployments": [
                                  {"base_url": f"http://s{n}", "name": f"s{n}", "max_concurrent": 1}
                                  for n in range(len(servers))]})
    redis.set(keys.deployment_affinity_key("m", "session:" + SESSION_JOB.session), "s0")
    redis.zadd(keys.inflight_key("m", "s0"), {"w|busy|bob": time.time()})
    return RoutedUpstream("m", entry.settings, list(servers), redis, "w")


SESSION_JOB = JOB.model_copy(update={"session": "cd" * 16, "messages": [Message(role="user", content="x" * 20_000)]})


def test_a_sessions_turn_waits_for_its_full_server_and_takes_the_place_it_frees(clean_redis):
    home, other = Scripted(["warm"]), Scripted(["cold"])
    router = _bounded(clean_redis, 30, home, other)
    line = keys.deploy_waiting_key("m", "s0")

    def free_when_in_line():
        wait_until(lambda: clean_redis.zcard(line) == 1, what="the turn in s0's line")
        clean_redis.zrem(keys.inflight_key("m", "s0"), "w|busy|bob")
    freeing = threading.Thread(target=free_when_in_line)
    freeing.start()
    assert _run(router, SESSION_JOB)[0] == ["warm"]
    freeing.join()
    assert other.calls == 0 and clean_redis.zcard(line) == 0


def test_past_its_wait_the_turn_goes_to_another_server(clean_redis):
    home, other = Scripted(["warm"]), Scripted(["cold"])
    started = time.monotonic()
    assert _run(_bounded(clean_redis, 0.3, home, other), SESSION_JOB)[0] == ["cold"]
    assert time.monotonic() - started >= 0.3 and home.calls == 0
    assert clean_redis.zcard(keys.deploy_waiting_key("m", "s0")) == 0


def test_with_no_wait_set_the_turn_goes_to_another_server_at_once(clean_redis):
    home, other = Scripted(["warm"]), Scripted(["cold"])
    assert _run(_bounded(clean_redis, 0, home, other), SESSION_JOB)[0] == ["cold"]
    assert clean_redis.exists(keys.deploy_waiting_key("m", "s0")) == 0


def test_a_short_conversation_goes_to_another_server_at_once():
    assert waits_for(SESSION_JOB, affinity_of(SESSION_JOB)) == ("session:" + "cd" * 16,)
    short = SESSION_JOB.model_copy(update={"messages": [Message(role="user", content="x" * 1_000)]})
    assert waits_for(short, affinity_of(short)) == ()  # reading it again costs less than waiting
    assert waits_for(JOB, affinity_of(JOB)) == ()  # no session
