"""What a job costs its person's share of the fair queue: the work it asks of
a model, in thousands of tokens (prompt tokens not read from a cache, plus
the tokens generated), so that equal weights get equal work rather than an
equal number of requests: an agent resending a 60,000-token prompt pays for
it, a 600-token chat turn pays a hundredth of that.

Estimated before the job is queued (by the web process, which counts the
prompt's characters once for its size check and this; else by
fairqueue.push; no tokenizer at hand there: a token per
CHARACTERS_PER_TOKEN characters, the whole prompt, and a reply of at most
EXPECTED_REPLY_TOKENS), and corrected when it ends by what its backend
counted: the difference is the person's debt (or credit, for a prompt read
from a cache), which their next job's place in the queue settles
(fair_push.lua). A job that ends without a count (aborted, failed) keeps
its estimate.
"""
from __future__ import annotations

from redis.client import Pipeline

from protocol import keys
from protocol.contract import Job
from protocol.events import Usage

CHARACTERS_PER_TOKEN = 4
EXPECTED_REPLY_TOKENS = 256  # what a reply is guessed to cost before it is made (at most its max_tokens)
SMALLEST = 0.01  # thousands of tokens: no job is free, so a flood of empty ones still takes its turns
DEBT_FIELD = "debt:"  # + a person: in their pool's state hash (keys.fair_state_key)


def estimate(job: Job, characters: int | None = None) -> float:
    """The job's cost, in thousands of tokens, before it runs (`characters`:
    its prompt_characters(), where the caller has counted them already)."""
    if job.count_only:  # counting a prompt generates nothing and reads no cache
        return SMALLEST
    characters = job.prompt_characters() if characters is None else characters
    reply = 0 if job.embed is not None else min(job.options.max_tokens or EXPECTED_REPLY_TOKENS,
                                                  EXPECTED_REPLY_TOKENS)
    return max((characters / CHARACTERS_PER_TOKEN + reply) / 1000, SMALLEST)


def actual(usage: Usage) -> float:
    """What a job that ran cost, in thousands of tokens, by its backend's count."""
    read = usage.prompt_tokens - (usage.cached_tokens or 0)
    return max((read + usage.completion_tokens) / 1000, SMALLEST)


def settle(pipe: Pipeline, pool: str, job: Job, usage: Usage) -> None:
    """Queue, on `pipe`, the correction of a job that ran to its end: what it
    cost beyond its estimate (job.charge) becomes its person's debt."""
    if not job.charge or not job.usage_of or job.count_only:
        return
    state = keys.fair_state_key(pool)
    pipe.hincrbyfloat(state, DEBT_FIELD + job.usage_of, actual(usage) - job.charge)
    pipe.expire(state, 86400)
