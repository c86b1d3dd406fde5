"""The fair queue's Lua on a real Redis: order of service across people
(fair and FIFO), completions first, the per-person limit as waiting, weights,
abandoned jobs dropped, one-at-a-time models handed to an idle worker, and
a person's affinity to the worker holding their prompt cache."""
from __future__ import annotations

import time
import uuid

import pytest

import jobqueue
from jobqueue import affinity, fairqueue
from jobqueue.fairqueue import Asker, Placement, Ticketing
from jobqueue.records import job_state, job_taken, send_abort
from protocol import keys
from protocol.contract import Job, Message
from protocol.presence import ALIVE_TTL_SECONDS, drained_recently
from protocol.queue import direct_queue, ticket_queue

POOL = "local"
ONE_IDLE = {"smol": (1, 1, {})}  # a worker whose copy of "smol" has its one sequence free


def queue(redis, web, person, *, model="echo", job_class="chat", limit=100, weight=1.0, serial=False,
          policy="fair", expires_in=60.0, replies: bool = False, pool=POOL, ticket: bool = False,
          cache_key: str = "", session: str = "", prompt: str = "hello", background: bool = False) -> str:
    """A job of `prompt` (every person's the same by default: equal work)."""
    job_id = uuid.uuid4().hex
    job = Job(id=job_id, model=model, messages=[Message(role="user", content=prompt)], web_id=web,
              expires_at=time.time() + expires_in, reply_channel=keys.reply_channel(web, job_id) if replies else "",
              cache_key=cache_key, session=session, background=background)
    fairqueue.push(redis, job, Asker(person, limit, weight), Placement(pool, job_class, policy, serial),
                   tickets=Ticketing.ASK if ticket else Ticketing.NONE)
    return job.id


def take_all(redis, worker="w", **kwargs) -> list[str]:
    """Who each taken job belonged to, in order, finishing each at once."""
    order = []
    while (taken := fairqueue.take(redis, POOL, worker, **kwargs)).job is not None:
        order.append(taken.person)
        fairqueue.finish(redis, taken.person, taken.lease)
    return order


def test_a_backlog_is_interleaved_with_a_newcomer(clean_redis, web):
    for _ in range(5):
        queue(clean_redis, web, "alice")
    queue(clean_redis, web, "bob")
    queue(clean_redis, web, "bob")
    assert take_all(clean_redis) == ["alice", "bob", "alice", "bob", "alice", "alice", "alice"]


def test_fifo_keeps_arrival_order(clean_redis, web):
    for person in ["alice"] * 3 + ["bob"]:
        queue(clean_redis, web, person, policy="fifo")
    assert take_all(clean_redis) == ["alice", "alice", "alice", "bob"]


def test_someone_arriving_later_goes_next_not_last(clean_redis, web):
    for _ in range(10):
        queue(clean_redis, web, "alice")
    taken = [fairqueue.take(clean_redis, POOL, "w") for _ in range(3)]  # alice's first three run
    queue(clean_redis, web, "bob")
    assert fairqueue.take(clean_redis, POOL, "w").person == "bob"
    assert all(t.person == "alice" for t in taken)


def test_weights_share_in_proportion(clean_redis, web):
    for _ in range(6):
        queue(clean_redis, web, "batch", weight=1.0)
        queue(clean_redis, web, "vip", weight=2.0)
    first_six = take_all(clean_redis)[:6]
    assert first_six.count("vip") == 4 and first_six.count("batch") == 2


def test_completions_go_first(clean_redis, web):
    queue(clean_redis, web, "alice", job_class="chat")
    queue(clean_redis, web, "bob", job_class="completion")
    assert take_all(clean_redis) == ["bob", "alice"]


def test_over_the_limit_a_job_waits_and_runs_when_a_slot_frees(clean_redis, web):
    queue(clean_redis, web, "alice", limit=1)
    queue(clean_redis, web, "alice", limit=1)
    queue(clean_redis, web, "bob", limit=1)
    first = fairqueue.take(clean_redis, POOL, "w")
    assert first.person == "alice"
    assert fairqueue.take(clean_redis, POOL, "w").person == "bob"  # alice's second waits
    assert fairqueue.take(clean_redis, POOL, "w").job is None
    assert fairqueue.waiting_by_person(clean_redis, POOL) == {"alice": 1}
    assert fairqueue.finish(clean_redis, "alice", first.lease) == [POOL]  # her skipped pool needs a ticket
    assert fairqueue.take(clean_redis, POOL, "w").person == "alice"
    assert fairqueue.depth(clean_redis, POOL) == 0 and fairqueue.waiting_by_person(clean_redis, POOL) == {}


def test_finishing_reads_and_clears_every_pool_the_person_was_skipped_in(clean_redis, web):
    clean_redis.sadd(keys.FAIR_BLOCKED_PREFIX + "alice", "pool-a", "pool-b")
    assert fairqueue.finish(clean_redis, "alice", "lease") == ["pool-a", "pool-b"]  # a ticket each
    assert fairqueue.finish(clean_redis, "alice", "lease") == []  # and only once


def test_finishing_and_taking_the_next_in_one_round_trip_frees_the_slot_first(clean_redis, web):
    queue(clean_redis, web, "alice", limit=1)
    queue(clean_redis, web, "alice", limit=1)
    first = fairqueue.take(clean_redis, POOL, "w")
    assert fairqueue.take(clean_redis, POOL, "w").job is None  # alice's second waits for her limit
    blocked, following = fairqueue.finish_and_take(clean_redis, "alice", first.lease, POOL, "w")
    assert blocked == [POOL] and following.person == "alice" and following.job is not None
    blocked, following = fairqueue.finish_and_take(clean_redis, "alice", following.lease, POOL, "w")
    assert blocked == [] and following.job is None
    assert clean_redis.zcard(keys.active_key("alice")) == 0


def test_finish_and_take_sends_the_finished_jobs_own_writes_first_in_the_same_round_trip(clean_redis, web):
    queue(clean_redis, web, "alice")
    queue(clean_redis, web, "bob")
    first = fairqueue.take(clean_redis, POOL, "w")
    batch = clean_redis.pipeline(transaction=False)  # as the worker's slot sends it (workers/tasks.py)
    batch.set(keys.state_key("finished-job"), b"its last writes")
    _, following = fairqueue.finish_and_take(clean_redis, first.person, first.lease, POOL, "w", batch)
    assert clean_redis.get(keys.state_key("finished-job")) == b"its last writes" and following.person == "bob"


def test_finish_and_take_loads_the_take_script_into_a_redis_that_lost_it(clean_redis, web):
    queue(clean_redis, web, "alice")
    queue(clean_redis, web, "bob")
    first = fairqueue.take(clean_redis, POOL, "w")
    clean_redis.script_flush()  # as after a Redis restart
    _, following = fairqueue.finish_and_take(clean_redis, first.person, first.lease, POOL, "w")
    assert following.person == "bob" and clean_redis.zcard(keys.active_key(first.person)) == 0


@pytest.fixture
def pool(clean_redis):
    """A pool of its own, whose tickets no worker of the test session takes."""
    return f"tickets-{uuid.uuid4().hex[:8]}"


def on_their_way(redis, pool, job_class="chat") -> int:
    return redis.zcard(keys.tickets_key(ticket_queue(pool, job_class)))


def push(redis, web, person, pool, job_class="chat", background: bool = False) -> tuple[bool, str]:
    """Queue a job as the web process does: whether it needs a ticket sent
    (the ticket's id is the job's), and the job's id."""
    job = Job(id=uuid.uuid4().hex, model="echo", messages=[Message(role="user", content=person)], web_id=web,
              expires_at=time.time() + 60, background=background)
    _, needs, _ = fairqueue.push(redis, job, Asker(person, 100), Placement(pool, job_class), tickets=Ticketing.ASK)
    return bool(needs), job.id


def test_a_job_needs_a_ticket_only_while_fewer_are_on_their_way_than_jobs_wait(clean_redis, web, pool):
    (alice_needs, alice), (bob_needs, _) = push(clean_redis, web, "alice", pool), push(clean_redis, web, "bob", pool)
    assert alice_needs and bob_needs and on_their_way(clean_redis, pool) == 2
    first = fairqueue.take(clean_redis, pool, "w", want=alice, ticket_from=ticket_queue(pool, "chat"))
    assert first.person == "alice" and on_their_way(clean_redis, pool) == 1  # alice's arrived, bob's is on its way
    # A slot going on from its last job takes bob without a ticket: his stays on its way, for the next job.
    _, following = fairqueue.finish_and_take(clean_redis, first.person, first.lease, pool, "w")
    assert following.person == "bob" and on_their_way(clean_redis, pool) == 1
    assert not push(clean_redis, web, "carol", pool)[0]  # the ticket on its way will wake a slot for her
    assert push(clean_redis, web, "dave", pool)[0]  # two wait now, one ticket on its way


def test_a_floods_own_tickets_do_not_take_its_jobs_ahead_of_a_colleagues(clean_redis, web, pool):
    """A's batch of jobs sends its tickets ahead of B's one job. A slot that
    gets one of A's tickets takes the fairest job, B's, not that ticket's
    own (issue 45: B's p99 wait under A's flood was two jobs' time)."""
    flood = [push(clean_redis, web, "alice", pool)[1] for _ in range(6)]
    first = fairqueue.take(clean_redis, pool, "w", want=flood[0], ticket_from=ticket_queue(pool, "chat"))
    assert first.job.id == flood[0]
    push(clean_redis, web, "bob", pool)
    second = fairqueue.take(clean_redis, pool, "w", want=flood[3], ticket_from=ticket_queue(pool, "chat"))
    assert second.person == "bob"
    third = fairqueue.take(clean_redis, pool, "w", want=flood[5], ticket_from=ticket_queue(pool, "chat"))
    assert third.job.id == flood[1]  # then A's in their order, whichever ticket woke the slot


def test_a_ticket_sent_to_one_worker_takes_its_own_job_first(clean_redis, web, pool):
    """A job handed to a worker (its model's copy is idle there, or it holds
    the person's cache) is the one its direct ticket takes."""
    (_, alice), (_, bob) = push(clean_redis, web, "alice", pool), push(clean_redis, web, "bob", pool)
    taken = fairqueue.take(clean_redis, pool, "w", want=bob, ticket_from=direct_queue("w"))
    assert taken.job.id == bob and fairqueue.take(clean_redis, pool, "w").job.id == alice


def test_tickets_are_counted_per_class(clean_redis, web, pool):
    assert push(clean_redis, web, "alice", pool, job_class="completion")[0]
    assert push(clean_redis, web, "bob", pool, job_class="chat")[0]
    assert (on_their_way(clean_redis, pool, "completion"), on_their_way(clean_redis, pool, "chat")) == (1, 1)


def push_with_its_ticket_sent(redis, web, person, pool) -> tuple[tuple, str]:
    """Queue a job whose ticket went beside the call: (must another be sent,
    did it need one), and its id."""
    job = Job(id=uuid.uuid4().hex, model="echo", messages=[Message(role="user", content=person)], web_id=web,
              expires_at=time.time() + 60)
    _, send_another, needed = fairqueue.push(redis, job, Asker(person, 100), Placement(pool), tickets=Ticketing.SENT)
    return (bool(send_another), bool(needed)), job.id


def test_a_ticket_sent_beside_is_counted_and_says_whether_it_was_needed(clean_redis, web, pool):
    (alice_sent, alice), (bob_needs, _) = push_with_its_ticket_sent(clean_redis, web, "alice", pool), \
        push(clean_redis, web, "bob", pool)
    assert alice_sent == (False, True) and bob_needs and on_their_way(clean_redis, pool) == 2
    first = fairqueue.take(clean_redis, pool, "w", want=alice, ticket_from=ticket_queue(pool, "chat"))
    fairqueue.finish_and_take(clean_redis, first.person, first.lease, pool, "w")  # bob's, without his ticket
    # His ticket is on its way, and one job waits: carol's, sent anyway, was not needed (and is counted).
    assert push_with_its_ticket_sent(clean_redis, web, "carol", pool)[0] == (False, False)
    assert on_their_way(clean_redis, pool) == 2


def test_a_ticket_that_overtook_its_job_has_the_job_ask_for_another(clean_redis, web, pool):
    job_id = uuid.uuid4().hex
    nothing = fairqueue.take(clean_redis, pool, "w", want=job_id, ticket_from=ticket_queue(pool, "chat"))
    assert nothing.job is None and clean_redis.exists(keys.early_ticket_key(job_id))
    job = Job(id=job_id, model="echo", messages=[Message(role="user", content="x")], web_id=web,
              expires_at=time.time() + 60)
    _, send_another, _ = fairqueue.push(clean_redis, job, Asker("alice", 100), Placement(pool), tickets=Ticketing.SENT)
    assert send_another and on_their_way(clean_redis, pool) == 1  # the one it sends now
    assert not clean_redis.exists(keys.early_ticket_key(job_id))


def test_lost_tickets_are_forgotten(clean_redis, web, pool):
    push(clean_redis, web, "alice", pool)
    fairqueue.forget_lost_tickets(clean_redis, [ticket_queue(pool, "chat")], time.time() - 60)
    assert on_their_way(clean_redis, pool) == 1  # sent just now: on its way still
    fairqueue.forget_lost_tickets(clean_redis, [ticket_queue(pool, "chat")], time.time() + 1)
    assert on_their_way(clean_redis, pool) == 0
    assert push(clean_redis, web, "bob", pool)[0]  # two jobs wait, none on its way


def test_background_work_waits_behind_everyones_interactive_turns(clean_redis, web):
    queue(clean_redis, web, "alice", background=True)
    queue(clean_redis, web, "alice", background=True)
    queue(clean_redis, web, "bob")
    queue(clean_redis, web, "alice")  # alice's own turn too
    queue(clean_redis, web, "carol", job_class="completion")
    assert take_all(clean_redis) == ["carol", "bob", "alice", "alice", "alice"]
    assert fairqueue.depth(clean_redis, POOL) == 0 and clean_redis.zcard(keys.fair_background_since_key(POOL)) == 0


def test_background_work_past_its_patience_goes_before_chat(clean_redis, web, monkeypatch):
    """No starvation: however much chat keeps coming, a background job that
    waited BACKGROUND_PATIENCE seconds is served next (after completions)."""
    queue(clean_redis, web, "alice", background=True)
    queue(clean_redis, web, "bob")
    queue(clean_redis, web, "carol", job_class="completion")
    monkeypatch.setattr(fairqueue, "BACKGROUND_PATIENCE", 0.0)  # (its patience ran out)
    assert take_all(clean_redis) == ["carol", "alice", "bob"]


def test_a_background_jobs_own_ticket_does_not_put_it_ahead_of_chat(clean_redis, web, pool):
    (_, side_call), (_, turn) = push(clean_redis, web, "alice", pool, background=True), push(clean_redis, web, "bob", pool)
    first = fairqueue.take(clean_redis, pool, "w", want=side_call, ticket_from=ticket_queue(pool, "chat"))
    assert first.job.id == turn
    assert fairqueue.take(clean_redis, pool, "w", want=turn, ticket_from=ticket_queue(pool, "chat")).job.id == side_call
    assert on_their_way(clean_redis, pool) == 0


def test_a_background_job_is_taken_at_its_fair_tag_not_its_place_behind_it(clean_redis, web):
    """It waits at its fair tag plus BACKGROUND_OFFSET, so any worker taking
    the lowest score (this release's, or the one before, which knows no
    background work) serves it after every interactive job; taking it moves
    the pool's virtual time by its tag, not by how far behind it waited."""
    queue(clean_redis, web, "alice", background=True)
    assert fairqueue.take(clean_redis, POOL, "w").person == "alice"
    assert float(clean_redis.hget(keys.fair_state_key(POOL), "vtime") or 0) < 1


def test_a_background_job_taken_out_unrun_leaves_its_patience_too(clean_redis, web):
    job_id = queue(clean_redis, web, "alice", background=True)
    assert fairqueue.remove(clean_redis, POOL, job_id)
    assert clean_redis.zcard(keys.fair_background_since_key(POOL)) == 0 and fairqueue.depth(clean_redis, POOL) == 0


def test_background_work_leaves_a_sequence_free_for_a_turn(clean_redis, web, monkeypatch):
    """A copy with one free sequence of four keeps it for interactive turns;
    with two free, background work takes one; a copy of one sequence runs it
    when idle; and past its patience it takes the last free sequence too."""
    side_call = queue(clean_redis, web, "alice", model="smol", serial=True, background=True)
    assert fairqueue.take(clean_redis, POOL, "w1", idle_serial={"smol": (1, 4)}).job is None
    assert clean_redis.exists(keys.fair_job_key(side_call))  # still waiting, not handed elsewhere
    turn = queue(clean_redis, web, "bob", model="smol", serial=True)
    assert fairqueue.take(clean_redis, POOL, "w1", idle_serial={"smol": (1, 4)}).job.id == turn
    assert fairqueue.take(clean_redis, POOL, "w1", idle_serial={"smol": (2, 4)}).job.id == side_call
    queue(clean_redis, web, "alice", model="smol", serial=True, background=True)
    assert fairqueue.take(clean_redis, POOL, "w2", idle_serial={"smol": (1, 1)}).person == "alice"
    queue(clean_redis, web, "alice", model="smol", serial=True, background=True)
    monkeypatch.setattr(fairqueue, "BACKGROUND_PATIENCE", 0.0)  # (its patience ran out)
    assert fairqueue.take(clean_redis, POOL, "w1", idle_serial={"smol": (1, 4)}).person == "alice"


def test_a_person_holding_sequences_here_is_handed_to_a_worker_with_room_for_them(clean_redis, web):
    """Bob is at work; alice holds three of w1's four sequences, so w1
    leaves her its last one and hands her job to idle w2 instead."""
    queue(clean_redis, web, "bob", model="smol", serial=True)
    assert fairqueue.take(clean_redis, POOL, "w1", idle_serial={"smol": (4, 4, {})}).person == "bob"
    fairqueue.mark_free(clean_redis, "w1", ["smol"])
    fairqueue.mark_free(clean_redis, "w2", ["smol"])
    job_id = queue(clean_redis, web, "alice", model="smol", serial=True)
    held = fairqueue.take(clean_redis, POOL, "w1", idle_serial={"smol": (1, 4, {"alice": 3})})
    assert held.job is None and (held.forward_to, held.forward_job) == ("w2", job_id)
    assert fairqueue.take(clean_redis, POOL, "w2", want=job_id, idle_serial={"smol": (4, 4, {})}).job.id == job_id


def test_the_spare_sequence_is_kept_for_a_person_with_nothing_running(clean_redis, web):
    """A copy of four sequences and a spare: alice, alone, fills the four
    (none leaves her the last), never the spare; bob, holding none, takes
    it; once he holds it, his next leaves the last free one to others, and
    background work leaves the spare too."""
    for _ in range(2):
        queue(clean_redis, web, "alice", model="smol", serial=True)
    assert fairqueue.take(clean_redis, POOL, "w1", idle_serial={"smol": (2, 5, {"alice": 3}, 1)}).person == "alice"
    assert fairqueue.take(clean_redis, POOL, "w1", idle_serial={"smol": (1, 5, {"alice": 4}, 1)}).job is None
    for _ in range(2):
        queue(clean_redis, web, "bob", model="smol", serial=True)
    assert fairqueue.take(clean_redis, POOL, "w1", idle_serial={"smol": (1, 5, {"alice": 4}, 1)}).person == "bob"
    assert fairqueue.take(clean_redis, POOL, "w1", idle_serial={"smol": (1, 5, {"bob": 1, "alice": 3}, 1)}).job is None
    assert fairqueue.take(clean_redis, POOL, "w1", idle_serial={"smol": (1, 5, {"alice": 4}, 1)}).person == "bob"
    queue(clean_redis, web, "carol", model="smol", serial=True, background=True)
    assert fairqueue.take(clean_redis, POOL, "w1", idle_serial={"smol": (1, 5, {"alice": 4}, 1)}).job is None
    assert fairqueue.take(clean_redis, POOL, "w1", idle_serial={"smol": (2, 5, {"alice": 3}, 1)}).person == "alice"
    assert fairqueue.take(clean_redis, POOL, "w1", idle_serial={"smol": (2, 5, {"alice": 3}, 1)}).person == "carol"


def test_a_running_slot_of_a_dead_web_process_is_freed(clean_redis, web):
    clean_redis.zadd(keys.active_key("alice"), {keys.lease_member("dead-web", "old"): 1.0})
    queue(clean_redis, web, "alice", limit=1)
    assert fairqueue.take(clean_redis, POOL, "w").person == "alice"


def test_abandoned_jobs_are_dropped(clean_redis, web):
    aborted = queue(clean_redis, web, "alice")
    send_abort(clean_redis, aborted)
    queue(clean_redis, web, "bob", expires_in=-1)
    queue(clean_redis, "dead-web", "carol")
    kept = queue(clean_redis, web, "dave")
    taken = fairqueue.take(clean_redis, POOL, "w")
    assert taken.job.id == kept and fairqueue.depth(clean_redis, POOL) == 0
    assert fairqueue.waiting_by_person(clean_redis, POOL) == {}


def test_removed_while_waiting(clean_redis, web):
    job_id = queue(clean_redis, web, "alice")
    assert fairqueue.remove(clean_redis, POOL, job_id)
    assert not fairqueue.remove(clean_redis, POOL, job_id)
    assert fairqueue.take(clean_redis, POOL, "w").job is None


def test_a_busy_worker_hands_a_one_at_a_time_job_to_an_idle_one(clean_redis, web):
    fairqueue.mark_free(clean_redis, "w2", ["smol"])
    job_id = queue(clean_redis, web, "alice", model="smol", serial=True)
    busy = fairqueue.take(clean_redis, POOL, "w1", idle_serial={})
    assert busy.job is None and (busy.forward_to, busy.forward_job) == ("w2", job_id)
    assert fairqueue.take(clean_redis, POOL, "w3", idle_serial=ONE_IDLE).job is None  # held for w2
    taken = fairqueue.take(clean_redis, POOL, "w2", want=job_id, idle_serial=ONE_IDLE)
    assert taken.job.id == job_id


def test_a_one_at_a_time_job_waits_for_a_busy_worker_only_when_none_is_idle(clean_redis, web):
    queue(clean_redis, web, "alice", model="smol", serial=True)
    busy = fairqueue.take(clean_redis, POOL, "w1", idle_serial={})
    assert busy.job is None and busy.forward_to == ""
    assert fairqueue.take(clean_redis, POOL, "w1", idle_serial=ONE_IDLE).person == "alice"


def test_the_person_goes_to_the_worker_holding_their_prefix_when_it_is_idle(clean_redis, web):
    affinity.remember_affinity(clean_redis, "smol", ["alice"], "w2")
    fairqueue.mark_free(clean_redis, "w2", ["smol"])
    job_id = queue(clean_redis, web, "alice", model="smol", serial=True)
    other = fairqueue.take(clean_redis, POOL, "w1", idle_serial=ONE_IDLE)
    assert other.job is None and (other.forward_to, other.forward_job) == ("w2", job_id)
    assert fairqueue.take(clean_redis, POOL, "w2", want=job_id, idle_serial=ONE_IDLE).job.id == job_id


def test_a_cache_key_goes_to_the_worker_holding_its_prefix_whoever_sends_it(clean_redis, web):
    keyed = Job(id="x", model="smol", cache_key="repo-prompt-v1")
    affinity.remember_affinity(clean_redis, "smol", affinity.held_by_worker(keyed, "alice"), "w2")
    affinity.remember_affinity(clean_redis, "smol", ["bob"], "w3")  # bob's own last job ran on w3
    fairqueue.mark_free(clean_redis, "w2", ["smol"])
    fairqueue.mark_free(clean_redis, "w3", ["smol"])
    job_id = queue(clean_redis, web, "bob", model="smol", serial=True, cache_key="repo-prompt-v1")
    other = fairqueue.take(clean_redis, POOL, "w1", idle_serial=ONE_IDLE)
    assert (other.forward_to, other.forward_job) == ("w2", job_id)


def test_a_cache_key_of_any_length_makes_a_short_affinity_name():
    cache, person = affinity.affinity_of(Job(id="x", model="smol", cache_key="k" * 100_000), "alice").split("\x1f")
    assert cache.startswith("cache:") and len(cache) < 64 and person == "alice"
    assert affinity.affinity_of(Job(id="x", model="smol"), "alice") == "alice"


def test_affinity_names_most_specific_first_and_what_a_worker_holds():
    both = Job(id="x", model="smol", cache_key="thread-1", session="ab" * 16)
    cache, session, person = affinity.affinity_of(both, "alice").split("\x1f")
    assert cache.startswith("cache:") and session == "session:" + "ab" * 16 and person == "alice"
    assert affinity.held_by_worker(both, "alice") == [cache]  # a shared cache key moves nobody's own affinity
    in_session = Job(id="y", model="smol", session="ab" * 16)
    assert affinity.held_by_worker(in_session, "alice") == [session, "alice"]


def test_two_sessions_of_one_person_each_go_to_the_worker_holding_theirs(clean_redis, web):
    """Two terminals of one person: each session's next turn goes to the
    worker that ran its last one, not to the person's last worker."""
    affinity.remember_affinity(clean_redis, "smol", affinity.held_by_worker(Job(id="a", model="smol", session="s1"),
                                                                             "alice"), "w2")
    affinity.remember_affinity(clean_redis, "smol", affinity.held_by_worker(Job(id="b", model="smol", session="s2"),
                                                                             "alice"), "w3")  # the person's last
    for worker in ("w1", "w2", "w3"):
        fairqueue.mark_free(clean_redis, worker, ["smol"])
    first = queue(clean_redis, web, "alice", model="smol", serial=True, session="s1")
    handed = fairqueue.take(clean_redis, POOL, "w1", idle_serial=ONE_IDLE)
    assert (handed.forward_to, handed.forward_job) == ("w2", first)
    assert fairqueue.take(clean_redis, POOL, "w2", want=first, idle_serial=ONE_IDLE).job.id == first
    second = queue(clean_redis, web, "alice", model="smol", serial=True, session="s2")
    handed = fairqueue.take(clean_redis, POOL, "w1", idle_serial=ONE_IDLE)
    assert (handed.forward_to, handed.forward_job) == ("w3", second)


def test_a_new_session_starts_where_its_person_was_and_a_busy_holder_means_no_affinity(clean_redis, web):
    affinity.remember_affinity(clean_redis, "smol", ["alice"], "w3")
    affinity.remember_affinity(clean_redis, "smol", ["session:busy"], "w2")  # w2 is not marked free: busy
    fairqueue.mark_free(clean_redis, "w3", ["smol"])
    new = queue(clean_redis, web, "alice", model="smol", serial=True, session="new")  # nobody holds it yet
    handed = fairqueue.take(clean_redis, POOL, "w1", idle_serial=ONE_IDLE)
    assert (handed.forward_to, handed.forward_job) == ("w3", new)
    assert fairqueue.take(clean_redis, POOL, "w3", want=new, idle_serial=ONE_IDLE).job.id == new
    waiting = queue(clean_redis, web, "alice", model="smol", serial=True, session="busy")
    assert fairqueue.take(clean_redis, POOL, "w1", idle_serial=ONE_IDLE).job.id == waiting  # not sent to w3


def test_but_not_when_that_worker_is_busy(clean_redis, web):
    affinity.remember_affinity(clean_redis, "smol", ["alice"], "w2")  # w2 is not marked free: busy
    job_id = queue(clean_redis, web, "alice", model="smol", serial=True)
    assert fairqueue.take(clean_redis, POOL, "w1", idle_serial=ONE_IDLE).job.id == job_id


def test_a_worker_promised_a_job_takes_no_other_one_at_a_time_job(clean_redis, web):
    fairqueue.mark_free(clean_redis, "w2", ["smol"])
    first = queue(clean_redis, web, "alice", model="smol", serial=True)
    fairqueue.take(clean_redis, POOL, "w1", idle_serial={})  # hands `first` to w2
    fairqueue.mark_free(clean_redis, "w2", ["smol"])  # a heartbeat meanwhile does not undo the promise
    queue(clean_redis, web, "bob", model="smol", serial=True)
    assert fairqueue.take(clean_redis, POOL, "w2", idle_serial=ONE_IDLE).job.id == first


def test_a_running_job_counts_for_its_person(clean_redis, web):
    queue(clean_redis, web, "alice")
    fairqueue.take(clean_redis, POOL, "w")  # alice runs one; then she queues more, and bob arrives
    for _ in range(3):
        queue(clean_redis, web, "alice")
    queue(clean_redis, web, "bob")
    assert take_all(clean_redis) == ["bob", "alice", "alice", "alice"]


def test_the_take_starts_the_job_in_the_same_round_trip(clean_redis, web):
    job_id = queue(clean_redis, web, "alice", replies=True)
    before = time.time()
    assert not job_taken(clean_redis, job_id)
    assert fairqueue.take(clean_redis, POOL, "worker-a").job.id == job_id
    assert job_taken(clean_redis, job_id)  # what its web process reads while the job is silent
    state = job_state(clean_redis, job_id)
    assert (state["status"], state["worker"], state["person"]) == ("running", "worker-a", "alice")
    assert before <= float(state["started_at"]) <= time.time()
    assert 0 < clean_redis.ttl(keys.alive_key(job_id)) <= ALIVE_TTL_SECONDS  # its first heartbeat
    assert drained_recently(clean_redis, POOL) == 1  # for Retry-After (jobqueue/admission.py)


def test_a_job_is_taken_once(clean_redis, web):
    queue(clean_redis, web, "alice")
    assert fairqueue.take(clean_redis, POOL, "worker-a").job is not None
    assert fairqueue.take(clean_redis, POOL, "worker-b").job is None


def test_a_payload_that_is_not_a_job_is_taken_out_and_named(clean_redis, web):
    job_id = queue(clean_redis, web, "alice")
    clean_redis.hset(keys.fair_job_key(job_id), "payload", '{"id": 1}')  # say, a newer web's broken job
    taken = fairqueue.take(clean_redis, POOL, "w")
    assert taken.job is None and taken.job_id == job_id and "model" in taken.malformed
    assert fairqueue.depth(clean_redis, POOL) == 0 and taken.person == "alice"  # finish() frees her slot
    assert taken.reply_channel == ""  # it names none: the error goes to the job's own channel


@pytest.mark.parametrize("payload, channel", [
    ('{"id": 1, "reply_channel": "switchboard:db0:web:w:job:1:events"}', "switchboard:db0:web:w:job:1:events"),
    ('{"id": 1, "reply_channel": 7}', ""), ("[1, 2]", ""), ("not json", "")],
    ids=["named", "not-a-text", "not-an-object", "not-json"])
def test_a_malformed_job_keeps_the_reply_channel_it_names_if_any(clean_redis, web, payload, channel):
    job_id = queue(clean_redis, web, "alice")
    clean_redis.hset(keys.fair_job_key(job_id), "payload", payload)
    taken = fairqueue.take(clean_redis, POOL, "w")
    assert taken.malformed and taken.reply_channel == channel


def test_waiting_people_in_metrics_name_the_ten_with_most_and_sum_the_rest(clean_redis, web):
    from app.metrics import _queues

    for n in range(12):
        for _ in range(n + 1):
            queue(clean_redis, web, f"p{n:02d}")
    depth, people = _queues(clean_redis, [POOL])
    assert [(s.labels, s.value) for s in depth.samples] == [({"pool": POOL}, 78.0)]
    shown = {s.labels["person"]: s.value for s in people.samples}
    assert len(shown) == 11 and shown["p11"] == 12.0 and shown["p02"] == 3.0 and shown["other"] == 1.0 + 2.0


def test_the_running_jobs_with_their_session_until_they_end_or_their_worker_dies(clean_redis, web):
    """jobqueue.running (the console's live view): a taken job is listed with
    its person, session and priority; finished, or its heartbeat gone with
    its worker, it leaves the list."""
    queue(clean_redis, web, "alice", session="s1")
    queue(clean_redis, web, "bob", background=True)
    first, second = fairqueue.take(clean_redis, POOL, "w1"), fairqueue.take(clean_redis, POOL, "w2")
    listed = {job["job"]: job for job in jobqueue.running(clean_redis)}
    assert (listed[first.job.id]["person"], listed[first.job.id]["session"], listed[first.job.id]["priority"],
            listed[first.job.id]["worker"]) == ("alice", "s1", "interactive", "w1")
    assert (listed[second.job.id]["session"], listed[second.job.id]["priority"]) == ("", "background")
    jobqueue.finish(clean_redis, first.job, jobqueue.Ending("stop"), POOL)
    assert [job["job"] for job in jobqueue.running(clean_redis)] == [second.job.id]
    clean_redis.delete(keys.alive_key(second.job.id))  # its worker died
    assert jobqueue.running(clean_redis) == [] and clean_redis.zcard(keys.RUNNING_JOBS) == 0
