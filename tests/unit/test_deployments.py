"""jobqueue/deployments.py against a real Redis: where requests go, how a
failed deployment rests and comes back, and the fair queue's hold on jobs
while every bounded deployment is full."""
from __future__ import annotations

import json
import time
from collections import Counter

import pytest

from jobqueue import deployments, fairqueue
from jobqueue.deployments import Attempt, Rest, Target
from jobqueue.fairqueue import Asker, Placement
from protocol import keys
from protocol.contract import Job

MODEL = "coder"
REST = Rest(first=0.2, most=1.0)


@pytest.fixture
def worker(clean_redis):
    """A live worker's id (its presence set: its requests count in flight),
    gone after the test (clean_redis keeps presence, as live state)."""
    clean_redis.set(keys.worker_key("w1"), json.dumps({"id": "w1", "queues": []}), ex=60)
    yield "w1"
    clean_redis.delete(keys.worker_key("w1"))


def _pick(redis, targets, n, affinity=(), exclude=()):
    return deployments.pick(redis, MODEL, targets, Attempt(f"w1|{n}", tuple(affinity), tuple(exclude)), 1.0)


def test_requests_spread_by_weight_under_load(clean_redis, worker):
    targets = [Target("a", weight=3), Target("b", weight=1)]
    placed = Counter(_pick(clean_redis, targets, n).deployment for n in range(40))  # none released: all in flight
    assert placed == {"a": 30, "b": 10}


def test_a_bounded_deployment_is_skipped_when_full_and_all_full_means_wait(clean_redis, worker):
    targets = [Target("a", max=2), Target("b", max=1)]
    picks = [_pick(clean_redis, targets, n) for n in range(4)]
    assert Counter(p.deployment for p in picks[:3]) == {"a": 2, "b": 1}
    assert (picks[3].deployment, picks[3].how) == ("", "full")
    on_b = next(n for n, p in enumerate(picks) if p.deployment == "b")
    deployments.release(clean_redis, MODEL, "b", f"w1|{on_b}")
    assert _pick(clean_redis, targets, 5).deployment == "b"


def test_a_dead_workers_requests_free_their_places(clean_redis, worker):
    targets = [Target("a", max=1)]
    assert deployments.pick(clean_redis, MODEL, targets, Attempt("gone|1"), 1.0).deployment == "a"
    assert _pick(clean_redis, targets, 2).deployment == "a"  # worker "gone" has no presence


def test_affinity_holds_while_the_deployment_is_not_overloaded(clean_redis, worker):
    targets = [Target("a"), Target("b")]
    deployments.started(clean_redis, MODEL, "b", ("person:alice",), 0.1)
    assert {_pick(clean_redis, targets, n, ["person:alice"]).deployment for n in range(2)} == {"b"}
    # b now runs 2, a none: 2 <= 2*0 + 1 fails, so the next goes to a
    assert _pick(clean_redis, targets, 3, ["person:alice"]).deployment == "a"


def test_the_most_specific_affinity_wins(clean_redis, worker):
    targets = [Target("a"), Target("b")]
    deployments.started(clean_redis, MODEL, "a", ("person:alice",), 0.1)
    deployments.started(clean_redis, MODEL, "b", ("prefix:p1",), 0.1)
    assert _pick(clean_redis, targets, 1, ["prefix:p1", "person:alice"]).deployment == "b"


def test_a_failed_deployment_rests_then_is_probed_back(clean_redis, worker):
    targets = [Target("a"), Target("b")]
    assert deployments.failed(clean_redis, MODEL, "a", "w1|1", REST) == pytest.approx(0.2)
    assert deployments.failed(clean_redis, MODEL, "a", "w1|2", REST) <= 0.2  # the same outage: no second rest
    assert {_pick(clean_redis, targets, n).deployment for n in range(3, 8)} == {"b"}
    _wait_until(lambda: clean_redis.pttl(keys.cooldown_key(MODEL, "a")) < 0)
    recovering = _pick(clean_redis, targets, 9)
    assert (recovering.deployment, recovering.probe) == ("b", "a")  # not routed to: probed
    assert _pick(clean_redis, targets, 10).probe == ""  # one probe at a time
    deployments.probed(clean_redis, MODEL, "a", False, REST)
    assert deployments.states(clean_redis, {MODEL: targets})[0].state == "resting"
    assert clean_redis.pttl(keys.cooldown_key(MODEL, "a")) > 200  # the second rest in a row is twice the first
    _wait_until(lambda: clean_redis.pttl(keys.cooldown_key(MODEL, "a")) < 0)
    deployments.probed(clean_redis, MODEL, "a", True, REST)
    assert deployments.states(clean_redis, {MODEL: targets})[0].state == "ready"


def test_retry_after_sets_the_rest_up_to_the_most(clean_redis, worker):
    assert deployments.failed(clean_redis, MODEL, "a", "w1|1", Rest(0.2, 1.0, retry_after=0.6)) == pytest.approx(0.6)
    assert deployments.failed(clean_redis, MODEL, "b", "w1|1", Rest(0.2, 1.0, retry_after=30)) == pytest.approx(1.0)


def test_when_every_deployment_rests_the_one_back_soonest_is_the_last_resort(clean_redis, worker):
    targets = [Target("a"), Target("b")]
    deployments.failed(clean_redis, MODEL, "a", "w1|1", Rest(5, 10))
    deployments.failed(clean_redis, MODEL, "b", "w1|2", Rest(1, 10))
    assert (_pick(clean_redis, targets, 3).deployment, _pick(clean_redis, targets, 3).how) == ("b", "last_resort")
    assert _pick(clean_redis, targets, 4, exclude=["a", "b"]).how == "none"


def test_states_and_counters_for_operators(clean_redis, worker):
    targets = [Target("a", max=4), Target("b")]
    failing = _pick(clean_redis, targets, 1).deployment
    _pick(clean_redis, targets, 2)
    deployments.failed(clean_redis, MODEL, failing, "w1|1", REST)
    a, b = deployments.states(clean_redis, {MODEL: targets})
    rested = a if failing == "a" else b
    assert (rested.state, rested.failures, rested.cooldowns) == ("resting", 1, 1) and (a.max, b.max) == (4, None)
    assert a.requests + b.requests == 2 and a.in_flight + b.in_flight == 1 and a.waiting == b.waiting == 0


def test_states_of_several_models_keep_each_models_counters(clean_redis, worker):
    deployments.pick(clean_redis, "other", [Target("a")], Attempt("w1|9"), 1)
    deployments.started(clean_redis, "other", "a", (), 0.3)
    _pick(clean_redis, [Target("a")], 1)
    mine, others = deployments.states(clean_redis, {MODEL: [Target("a")], "other": [Target("a")]})
    assert (mine.model, mine.requests, mine.ttft) == (MODEL, 1, {})
    assert (others.model, others.requests, others.in_flight) == ("other", 1, 1)
    assert others.ttft["+Inf"] == 1 and others.ttft["sum"] == 0.3


def _job(job_id: str, web: str, background: bool = False) -> Job:
    return Job(id=job_id, model=MODEL, web_id=web, enqueued_at=time.time(), expires_at=time.time() + 60,
               background=background)


def test_the_fair_queue_holds_a_job_while_every_bounded_deployment_is_full(clean_redis, worker, web):
    targets = [Target("a", max=1), Target("b", max=1)]
    where = Placement("upstream", deployments=deployments.gate(targets))
    first = _pick(clean_redis, targets, 0).deployment
    _pick(clean_redis, targets, 1)
    fairqueue.push(clean_redis, _job("j1", web), Asker("alice", 10), where)
    assert fairqueue.take(clean_redis, "upstream", "w1").job is None
    deployments.release(clean_redis, MODEL, first, "w1|0")
    assert fairqueue.take(clean_redis, "upstream", "w1").job.id == "j1"


def test_background_work_leaves_a_place_free_for_a_turn(clean_redis, worker, web, monkeypatch):
    """With one place left of the bounded deployments, a background job
    waits (an interactive turn takes the place); with two, it takes one; past
    its patience it takes the last."""
    targets = [Target("a", max=2)]
    where = Placement("upstream", deployments=deployments.gate(targets))
    _pick(clean_redis, targets, 0)
    fairqueue.push(clean_redis, _job("side", web, background=True), Asker("alice", 10), where)
    assert fairqueue.take(clean_redis, "upstream", "w1").job is None
    fairqueue.push(clean_redis, _job("turn", web), Asker("bob", 10), where)
    assert fairqueue.take(clean_redis, "upstream", "w1").job.id == "turn"
    deployments.release(clean_redis, MODEL, "a", "w1|0")
    assert fairqueue.take(clean_redis, "upstream", "w1").job.id == "side"  # (the turn never took its place here)
    fairqueue.push(clean_redis, _job("late", web, background=True), Asker("alice", 10), where)
    _pick(clean_redis, targets, 1)
    assert fairqueue.take(clean_redis, "upstream", "w1").job is None
    monkeypatch.setattr(fairqueue, "BACKGROUND_PATIENCE", 0.0)  # (its patience ran out)
    assert fairqueue.take(clean_redis, "upstream", "w1").job.id == "late"


def test_a_person_holding_a_place_leaves_the_last_one_to_others_at_work(clean_redis, worker, web):
    """Alice holds one of two places: her next job takes the other only
    while nobody else was served lately; once bob was (he is at work between
    turns), it waits and bob's turn takes the last place."""
    targets = [Target("a", max=2)]
    where = Placement("upstream", deployments=deployments.gate(targets))
    deployments.pick(clean_redis, MODEL, targets, Attempt("w1|0|alice"), 1.0)
    fairqueue.push(clean_redis, _job("alice-1", web), Asker("alice", 10), where)
    assert fairqueue.take(clean_redis, "upstream", "w1").job.id == "alice-1"  # nobody else at work
    deployments.release(clean_redis, MODEL, "a", "w1|0|alice")
    fairqueue.push(clean_redis, _job("bob-1", web), Asker("bob", 10), where)
    assert fairqueue.take(clean_redis, "upstream", "w1").job.id == "bob-1"  # bob is at work now
    deployments.pick(clean_redis, MODEL, targets, Attempt("w1|1|alice"), 1.0)  # alice-1 runs: one place left
    fairqueue.push(clean_redis, _job("alice-2", web), Asker("alice", 10), where)
    assert fairqueue.take(clean_redis, "upstream", "w1").job is None
    fairqueue.push(clean_redis, _job("bob-2", web), Asker("bob", 10), where)
    assert fairqueue.take(clean_redis, "upstream", "w1").job.id == "bob-2"


def _hold(redis, targets, n, session="session:s", member=None):
    attempt = Attempt(member or f"w1|{n}", (session, "person:alice"), hold=(session,))
    return deployments.pick(redis, MODEL, targets, attempt, 1.0)


def test_a_sessions_turn_waits_in_line_for_its_full_server_and_the_freed_place_is_its(clean_redis, worker):
    targets = [Target("a", max=1), Target("b", max=1)]
    home = _pick(clean_redis, targets, 0, ["session:s"]).deployment
    deployments.started(clean_redis, MODEL, home, ("session:s",), 0.1)
    assert (_hold(clean_redis, targets, 1).deployment, _hold(clean_redis, targets, 1).how) == ("", "held")
    assert _pick(clean_redis, targets, 2).deployment not in ("", home)  # another request is not held
    deployments.release(clean_redis, MODEL, home, "w1|0")
    assert (_pick(clean_redis, targets, 3).deployment, _pick(clean_redis, targets, 3).how) == ("", "full")
    assert _hold(clean_redis, targets, 1).deployment == home
    assert clean_redis.exists(keys.deploy_waiting_key(MODEL, home)) == 0


def test_past_its_wait_a_turn_leaves_the_line_for_another_server(clean_redis, worker):
    targets = [Target("a", max=1), Target("b", max=1)]
    home = _pick(clean_redis, targets, 0, ["session:s"]).deployment
    deployments.started(clean_redis, MODEL, home, ("session:s",), 0.1)
    assert _hold(clean_redis, targets, 1).how == "held"
    assert _pick(clean_redis, targets, 1, ["session:s"]).deployment not in ("", home)  # picked with no hold
    assert clean_redis.exists(keys.deploy_waiting_key(MODEL, home)) == 0


def test_turns_waiting_for_one_server_go_in_the_order_they_came(clean_redis, worker):
    targets = [Target("a", max=1)]
    _pick(clean_redis, targets, 0, ["session:s"])
    deployments.started(clean_redis, MODEL, "a", ("session:s", "session:t"), 0.1)
    assert _hold(clean_redis, targets, 1).how == "held"
    assert _hold(clean_redis, targets, 2, "session:t").how == "held"
    deployments.release(clean_redis, MODEL, "a", "w1|0")
    assert _hold(clean_redis, targets, 2, "session:t").how == "held"  # the first in line is not placed yet
    assert _hold(clean_redis, targets, 1).deployment == "a"


def test_a_place_kept_for_a_waiting_turn_holds_back_the_queue_until_it_leaves(clean_redis, worker, web):
    targets = [Target("a", max=1)]
    where = Placement("upstream", deployments=deployments.gate(targets))
    _pick(clean_redis, targets, 0, ["session:s"])
    deployments.started(clean_redis, MODEL, "a", ("session:s",), 0.1)
    assert _hold(clean_redis, targets, 1).how == "held"
    deployments.release(clean_redis, MODEL, "a", "w1|0")
    fairqueue.push(clean_redis, _job("j1", web), Asker("bob", 10), where)
    assert fairqueue.take(clean_redis, "upstream", "w1").job is None  # the place is the waiting turn's
    deployments.leave_lines(clean_redis, MODEL, targets, "w1|1")  # (it was cancelled)
    assert fairqueue.take(clean_redis, "upstream", "w1").job.id == "j1"


def test_operators_see_the_turns_in_line(clean_redis, worker):
    targets = [Target("a", max=1)]
    _pick(clean_redis, targets, 0, ["session:s"])
    deployments.started(clean_redis, MODEL, "a", ("session:s",), 0.1)
    _hold(clean_redis, targets, 1)
    [a] = deployments.states(clean_redis, {MODEL: targets})
    assert (a.in_flight, a.waiting) == (1, 1)


def test_a_dead_workers_waiting_turn_keeps_no_place(clean_redis, worker):
    targets = [Target("a", max=1)]
    _pick(clean_redis, targets, 0, ["session:s"])
    deployments.started(clean_redis, MODEL, "a", ("session:s",), 0.1)
    assert _hold(clean_redis, targets, 1, member="gone|1").how == "held"
    deployments.release(clean_redis, MODEL, "a", "w1|0")
    assert _pick(clean_redis, targets, 2).deployment == "a"  # worker "gone" has no presence


def _holds(redis, deployment: str, member: str) -> None:
    redis.zadd(keys.inflight_key(MODEL, deployment), {member: time.time()})


def test_a_person_holding_a_place_leaves_each_servers_last_one_to_others_at_work(clean_redis, worker, web):
    """Two free places, one on each server: alice, who holds one, takes
    neither while bob is at work (his next turn goes to his own server);
    bob takes one; once a server has two free, alice takes one there."""
    targets = [Target("a", max=2), Target("b", max=2)]
    where = Placement("upstream", deployments=deployments.gate(targets))
    _holds(clean_redis, "a", "w1|0|alice")
    _holds(clean_redis, "b", "w1|1|carol")
    clean_redis.zadd(keys.fair_seen_key("upstream"), {"bob": time.time()})
    fairqueue.push(clean_redis, _job("alice-2", web), Asker("alice", 10), where)
    assert fairqueue.take(clean_redis, "upstream", "w1").job is None
    alice = Attempt("w1|2|alice", ("person:alice",))
    deployments.started(clean_redis, MODEL, "a", ("person:alice",), 0.1)
    assert deployments.pick(clean_redis, MODEL, targets, alice, 1.0, "upstream").how == "full"
    fairqueue.push(clean_redis, _job("bob-1", web), Asker("bob", 10), where)
    assert fairqueue.take(clean_redis, "upstream", "w1").job.id == "bob-1"
    deployments.release(clean_redis, MODEL, "b", "w1|1|carol")
    assert fairqueue.take(clean_redis, "upstream", "w1").job.id == "alice-2"
    assert deployments.pick(clean_redis, MODEL, targets, alice, 1.0, "upstream").deployment == "b"  # not her a


def test_alone_on_the_pool_a_person_may_take_every_last_place(clean_redis, worker):
    targets = [Target("a", max=2), Target("b", max=2)]
    _holds(clean_redis, "a", "w1|0|alice")
    _holds(clean_redis, "b", "w1|1|alice")
    clean_redis.zadd(keys.fair_seen_key("upstream"), {"alice": time.time()})
    placed = {deployments.pick(clean_redis, MODEL, targets, Attempt(f"w1|{n}|alice"), 1.0, "upstream").deployment
              for n in (2, 3)}
    assert placed == {"a", "b"}


def test_a_person_holding_places_among_others_does_not_wait_in_line_for_a_colleagues_place(clean_redis, worker):
    targets = [Target("a", max=1), Target("b", max=2)]
    _holds(clean_redis, "a", "w1|0|alice")
    clean_redis.zadd(keys.fair_seen_key("upstream"), {"bob": time.time()})
    deployments.started(clean_redis, MODEL, "a", ("session:s",), 0.1)
    turn = Attempt("w1|1|alice", ("session:s",), hold=("session:s",))
    assert deployments.pick(clean_redis, MODEL, targets, turn, 1.0, "upstream").deployment == "b"
    assert clean_redis.exists(keys.deploy_waiting_key(MODEL, "a")) == 0


def test_an_unbounded_deployment_needs_no_gate():
    assert deployments.gate([Target("a", max=1), Target("b")]) == ""
    assert json.loads(deployments.gate([Target("a", max=1)])) == [{"name": "a", "weight": 1.0, "max": 1}]


def test_places_a_dead_worker_held_wake_the_jobs_held_for_them(clean_redis, worker, web):
    """No job of the model ends to take the held job: the beat's wake_held
    finds the places free once the worker's presence lapsed."""
    targets = [Target("a", max=1), Target("b", max=1)]
    where = Placement("upstream", deployments=deployments.gate(targets))
    for n in range(2):
        deployments.pick(clean_redis, MODEL, targets, Attempt(f"w1|{n}"), 1)
    fairqueue.push(clean_redis, _job("j1", web), Asker("alice", 10), where)
    assert fairqueue.take(clean_redis, "upstream", "w2").job is None  # held: both places taken
    assert deployments.wake_held(clean_redis, ["upstream", "other"]) == []  # w1 lives: still full
    clean_redis.delete(keys.worker_key("w1"))  # w1 died; its presence lapsed
    assert deployments.wake_held(clean_redis, ["upstream", "other"]) == ["upstream"]
    assert deployments.wake_held(clean_redis, ["upstream"]) == []  # one ticket per freeing
    assert fairqueue.take(clean_redis, "upstream", "w2").job.id == "j1"


def _wait_until(condition, seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.02)


def test_names_with_colons_never_share_a_deployments_count(clean_redis, worker):
    """Model "a:b" on deployment "c" and model "a" on deployment "b:c"."""
    bound = [Target("c", max=1)]
    assert deployments.pick(clean_redis, "a:b", bound, Attempt("w1|1"), 1).deployment == "c"
    assert deployments.pick(clean_redis, "a", [Target("b:c", max=1)], Attempt("w1|2"), 1).deployment == "b:c"
    assert deployments.pick(clean_redis, "a:b", bound, Attempt("w1|3"), 1).how == "full"
