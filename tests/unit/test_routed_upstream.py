"""workers/backends/routed.py with scripted servers and a real Redis: a
failure of the server before the first piece moves the request on; one of
the request, or one after the first piece, does not."""
from __future__ import annotations

import json

import pytest

from catalog.registry import parse_entry
from protocol import keys
from protocol.contract import FinishReason, Job, Message
from protocol.errors import BackendError
from workers.backends.routed import RoutedUpstream, affinity_of, server_failed
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
    stream, pieces = router.generate(job), []
    while True:
        try:
            pieces.append(next(stream))
        except StopIteration as end:
            return pieces, end.value


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
