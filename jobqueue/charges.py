"""What a job costs its person's share of the fair queue: the work it asks of
a model, in thousands of tokens (prompt tokens not read from a cache, plus
the tokens generated), so that equal weights get equal work rather than an
equal number of requests: an agent resending a 60,000-token prompt pays for
it, a 600-token chat turn pays a hundredth of that.

Estimated before the job is queued: its prompt by the web process, which
counts the prompt's characters once for its size check and this (else by
fairqueue.push; no tokenizer at hand there: a token per
CHARACTERS_PER_TOKEN characters, the whole prompt); its reply by
fair_push.lua, in the round trip that queues it, as long as the replies of
its session ran on that model and kind of request, else its person's, else
EXPECTED_REPLY_TOKENS (a newcomer is not charged for a colleague's habits),
and at most its max_tokens: so a four-token turn is charged as short, not as a third of a
400-word job. Corrected when it ends by what its backend counted: the
difference is the person's debt (or credit, for a prompt read from a cache),
which their next job's place in the queue settles (fair_push.lua), and its
reply's length is learned (`settle`). A job that ends without a count
(aborted, failed) keeps its estimate.
"""
from __future__ import annotations

from redis.client import Pipeline

from protocol import keys
from protocol.contract import Job
from protocol.events import Usage

CHARACTERS_PER_TOKEN = 4
EXPECTED_REPLY_TOKENS = 256  # a reply's guess where none was learned (at most its max_tokens)
LEARNED_REPLIES = 8  # the replies a learned length weighs, about (older ones count for less: fair_push.lua)
SMALLEST = 0.01  # thousands of tokens: no job is free, so a flood of empty ones still takes its turns
DEBT_FIELD = "debt:"  # + a person: in their pool's state hash (keys.fair_state_key)


def estimate(job: Job, characters: int | None = None) -> float:
    """The job's cost, in thousands of tokens, before it runs, with the
    reply's guess no reply was learned for (`characters`: its
    prompt_characters(), where the caller has counted them already)."""
    if job.count_only:  # counting a prompt generates nothing and reads no cache
        return SMALLEST
    characters = job.prompt_characters() if characters is None else characters
    return max((characters / CHARACTERS_PER_TOKEN + _cap(job, EXPECTED_REPLY_TOKENS)) / 1000, SMALLEST)


def _cap(job: Job, reply: float) -> float:
    """A reply of `reply` tokens, as long as the job lets it run."""
    if job.embed is not None or job.count_only:
        return 0
    return min(job.options.max_tokens or reply, reply)


def reply_guess(job: Job) -> dict:
    """What fair_push.lua needs to charge the job's reply as long as the
    learned ones (replies_keys): the estimate's part that is not the reply
    (thousands of tokens), the reply's bound (max_tokens; 0: no reply,
    None: none set), and its model and kind."""
    prior = _cap(job, EXPECTED_REPLY_TOKENS)
    base = job.charge - prior / 1000  # (fairqueue.push has set it: the estimate with the prior's reply)
    return {"base": max(base, 0.0), "bound": 0 if prior == 0 else job.options.max_tokens, "what": _what(job),
            "prior": EXPECTED_REPLY_TOKENS, "smallest": SMALLEST, "window": LEARNED_REPLIES}


def replies_keys(pool: str, job: Job, person: str) -> tuple[str, str]:
    """Where the lengths of the job's kind of replies are learned: its
    session's ("-" without one), and its person's (a new session of theirs
    is guessed as their others were)."""
    return keys.fair_replies_key(pool, job.session) if job.session else "-", keys.fair_replies_key(pool, person)


def _what(job: Job) -> str:
    """The model and kind of request whose replies are alike: an agent's
    turn (tools offered), a chat turn, a completion, background work."""
    kind = "background" if job.background else "completion" if job.prompt is not None \
        else "tools" if job.tools else "chat"
    return f"{job.model}|{kind}"


def actual(usage: Usage) -> float:
    """What a job that ran cost, in thousands of tokens, by its backend's count."""
    read = usage.prompt_tokens - (usage.cached_tokens or 0)
    return max((read + usage.completion_tokens) / 1000, SMALLEST)


def settle(pipe: Pipeline, pool: str, job: Job, usage: Usage) -> None:
    """Queue, on `pipe`, the correction of a job that ran to its end: what it
    cost beyond its estimate (job.charge, as fair_push.lua charged it)
    becomes its person's debt; how long its reply ran is learned."""
    if not job.charge or not job.usage_of or job.count_only:
        return
    state = keys.fair_state_key(pool)
    pipe.hincrbyfloat(state, DEBT_FIELD + job.usage_of, actual(usage) - job.charge)
    pipe.expire(state, 86400)
    if _cap(job, EXPECTED_REPLY_TOKENS) == 0:
        return
    what = _what(job)
    for learned in replies_keys(pool, job, job.usage_of):
        if learned == "-":
            continue
        pipe.hincrbyfloat(learned, "n:" + what, 1)
        pipe.hincrbyfloat(learned, "s:" + what, usage.completion_tokens)
        pipe.expire(learned, 86400)
