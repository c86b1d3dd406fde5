"""Shares by work (jobqueue/charges.py and fair_push.lua, on a real Redis):
a job costs its person the tokens it asks of a model, estimated when it is
queued and settled by its backend's count when it ends: equal weights get
equal work, not an equal number of requests, and a wrong estimate (a reply
longer than guessed, a prompt read from a cache) is made good on the
person's next job."""
from __future__ import annotations

import time

import pytest

from jobqueue import charges, fairqueue
from protocol import keys
from protocol.contract import EmbedSpec, Job, Message, SamplingOptions
from protocol.events import Usage
from tests.unit.test_fairqueue import POOL, queue, take_all

AGENT_PROMPT = "x" * 240_000  # some 60,000 tokens: an agent's turn with its tools and history
CHAT_TURN = "x" * 2_400  # some 600 tokens


def test_a_job_is_estimated_by_its_prompt_and_a_guessed_reply():
    chat = Job(id="a", model="m", messages=[Message(role="user", content="x" * 4000)])
    assert charges.estimate(chat) == pytest.approx((1000 + 256) / 1000)
    short = chat.model_copy(update={"options": SamplingOptions(max_tokens=1)})  # a quota probe
    assert charges.estimate(short) == pytest.approx(1.001)
    embedding = Job(id="b", model="m", embed=EmbedSpec(inputs=["x" * 400, "x" * 40]))
    assert charges.estimate(embedding) == pytest.approx(0.1)  # no reply: its longest input
    assert charges.estimate(chat.model_copy(update={"count_only": True})) == charges.SMALLEST
    assert charges.estimate(Job(id="c", model="m")) >= charges.SMALLEST
    assert charges.actual(Usage(prompt_tokens=60_000, cached_tokens=59_000, completion_tokens=500)) == 1.5


def test_equal_weights_share_the_work_not_the_requests(clean_redis, web):
    """Alice's agent resends 60,000 tokens a turn, Bob chats in 600: Bob's
    twenty turns cost less than one of hers, and all go before her second."""
    for _ in range(3):
        queue(clean_redis, web, "alice", prompt=AGENT_PROMPT)
    for _ in range(20):
        queue(clean_redis, web, "bob", prompt=CHAT_TURN)
    assert take_all(clean_redis) == ["alice"] + ["bob"] * 20 + ["alice", "alice"]


def _ran(redis, web, person: str, prompt: str, usage: Usage) -> None:
    """One job of the person's taken, run, and settled as its worker does."""
    queue(redis, web, person, prompt=prompt)
    taken = fairqueue.take(redis, POOL, "w")
    assert taken.person == person and taken.job.charge == charges.estimate(taken.job)
    _settled(redis, taken, usage)


def _settled(redis, taken: fairqueue.Taken, usage: Usage) -> None:
    """A taken job ended as its worker ends it: settled by its usage, its place freed."""
    with redis.pipeline(transaction=False) as pipe:
        charges.settle(pipe, POOL, taken.job.model_copy(update={"usage_of": taken.person}), usage)
        pipe.execute()
    fairqueue.finish(redis, taken.person, taken.lease)


def test_a_reply_longer_than_guessed_is_paid_on_the_next_job(clean_redis, web):
    _ran(clean_redis, web, "alice", "hello", Usage(prompt_tokens=2, completion_tokens=50_000))
    queue(clean_redis, web, "alice")
    for _ in range(5):
        queue(clean_redis, web, "bob")
    assert take_all(clean_redis) == ["bob"] * 5 + ["alice"]


def test_a_prompt_read_from_a_cache_is_given_back(clean_redis, web):
    """Alice's next agent turn finds 59,000 of its 60,000 tokens cached: it
    cost 1,100 tokens, not the 60,256 it was charged when queued."""
    _ran(clean_redis, web, "alice", AGENT_PROMPT, Usage(prompt_tokens=60_000, cached_tokens=59_000,
                                                        completion_tokens=100))
    queue(clean_redis, web, "alice")
    for _ in range(8):
        queue(clean_redis, web, "bob")
    assert take_all(clean_redis) == ["bob"] * 5 + ["alice"] + ["bob"] * 3  # her tag 1.1, after Bob's 1.029


def _learned(redis, web, person: str, session: str, tokens: int, times: int = 3) -> None:
    """The session ran `times` replies of `tokens` tokens."""
    for _ in range(times):
        queue(redis, web, person, session=session)
        _settled(redis, fairqueue.take(redis, POOL, "w"), Usage(prompt_tokens=2, completion_tokens=tokens))


def test_a_short_turn_is_charged_as_short_as_its_sessions_replies_ran(clean_redis, web):
    """Alice's agent writes 400-token replies, Bob's chat 4-token ones: each
    is charged its own, not 256 tokens, so Bob's ten turns (40 tokens) all go
    before Alice's second long job, and a guess that was right leaves no debt."""
    _learned(clean_redis, web, "alice", "agent", 400)
    _learned(clean_redis, web, "bob", "chat", 4)
    for _ in range(2):
        queue(clean_redis, web, "alice", session="agent")
    for _ in range(10):
        queue(clean_redis, web, "bob", session="chat")
    order, charged = [], {}
    while (taken := fairqueue.take(clean_redis, POOL, "w")).job is not None:
        order.append(taken.person)
        charged[taken.person] = taken.job.charge
        _settled(clean_redis, taken, Usage(prompt_tokens=2, completion_tokens=400 if taken.person == "alice" else 4))
    assert order[-1] == "alice" and sorted(order[:-1]) == ["alice"] + ["bob"] * 10
    assert charged == {"alice": pytest.approx(0.4 + 0.00125), "bob": charges.SMALLEST}  # (no job is free)
    debts = clean_redis.hgetall(keys.fair_state_key(POOL))
    # (what is left is the prompt's guess: 2 tokens counted for "hello"'s 1.25, on each of Alice's two jobs)
    assert all(abs(float(debts.get(f"debt:{p}".encode(), 0))) < 0.002 for p in ("alice", "bob"))


def test_a_new_session_is_guessed_as_its_persons_others_and_a_newcomer_by_the_prior(clean_redis, web):
    """Alice's new session is charged as her agent's replies ran; Carol,
    new, at the prior (not at a colleague's habits); and no guess exceeds
    the job's max_tokens."""
    _learned(clean_redis, web, "alice", "agent", 400)
    queue(clean_redis, web, "alice", session="another")
    assert fairqueue.take(clean_redis, POOL, "w").job.charge == pytest.approx(0.4 + 0.00125)
    queue(clean_redis, web, "carol")
    assert fairqueue.take(clean_redis, POOL, "w").job.charge == pytest.approx(0.256 + 0.00125)
    job = Job(id="capped", model="echo", messages=[Message(role="user", content="hello")], web_id=web,
              expires_at=time.time() + 60, session="agent", options=SamplingOptions(max_tokens=16))
    fairqueue.push(clean_redis, job, fairqueue.Asker("alice", 100), fairqueue.Placement(POOL))
    assert fairqueue.take(clean_redis, POOL, "w").job.charge == pytest.approx(0.016 + 0.00125)


def test_a_learned_length_follows_a_session_that_changed_its_ways(clean_redis, web):
    """After 40 replies of 400 tokens, 40 of 4 bring the session's guess
    under 10 tokens: older replies count for less."""
    _learned(clean_redis, web, "alice", "agent", 400, times=40)
    _learned(clean_redis, web, "alice", "agent", 4, times=40)
    queue(clean_redis, web, "alice", session="agent")
    assert fairqueue.take(clean_redis, POOL, "w").job.charge < 0.01 + 0.00125


def test_counting_a_prompt_or_an_uncharged_job_leaves_no_debt(clean_redis):
    counted = Job(id="a", model="m", usage_of="alice", count_only=True, charge=0.01)
    old_web = Job(id="b", model="m", usage_of="alice")  # queued by a web process that did not charge it
    with clean_redis.pipeline(transaction=False) as pipe:
        charges.settle(pipe, POOL, counted, Usage(prompt_tokens=5000))
        charges.settle(pipe, POOL, old_web, Usage(prompt_tokens=5000))
        assert len(pipe) == 0


def test_equal_work_keeps_arrival_order_whatever_the_estimates(clean_redis, web):
    """Seven agents take turns doing the same work (60 new tokens read, 8
    written), but their prompts differ in length, so each job was estimated
    differently and settled by a different debt. Their tags are equal in
    tokens; summed in floating point they were not, and a turn queued first
    could go after every colleague's queued later in the same round."""
    people = [f"p{n}" for n in range(7)]
    for length in (8_835, 7_214, 100):  # earlier work: a virtual time of 4.52425
        queue(clean_redis, web, "p7", prompt="x" * length)
    assert take_all(clean_redis) == ["p7"] * 3
    for round_ in range(12):
        arrival = people[round_ % 7:] + people[:round_ % 7]
        for person in arrival:
            queue(clean_redis, web, person, prompt="x" * (8_000 + 300 * round_ + 17 * int(person[1:])))
        taken = []
        for _ in people:
            job = fairqueue.take(clean_redis, POOL, "w")
            taken.append(job.person)
            _settled(clean_redis, job, Usage(prompt_tokens=2_000 + 75 * round_, cached_tokens=1_940 + 75 * round_,
                                             completion_tokens=8))
        assert taken == arrival, f"round {round_}"
