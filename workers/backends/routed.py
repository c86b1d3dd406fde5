"""An upstream model on several servers (catalog/deployments.py). Each
request goes to the deployment jobqueue.deployments picks for it; one that
fails before its first token (refused, 5xx, busy, no token in time) rests,
and the request moves to the next, so a dead server costs a client a slower
answer, not an error. After the first token a failure ends the stream in
band, as with one server: tokens are never replayed. A rested deployment is
probed in the background and comes back when it answers."""
from __future__ import annotations

import hashlib
import logging
import threading
import time
import uuid
from dataclasses import replace
from itertools import chain
from typing import Callable, Iterator, TypeVar

from redis import Redis

from catalog.deployments import Deployments
import jobqueue
from jobqueue import Attempt, Rest
from telemetry import tracing
from protocol.contract import EmbedSpec, Job
from protocol.errors import BackendError
from workers.backends.base import Backend
from workers.backends.upstream import UpstreamBackend
from workers.cancel import Cancel
from workers.model_output import Embedded, TextGenerator

log = logging.getLogger(__name__)
PREFIX_CHARACTERS = 4096  # of a prompt: requests that share them share a deployment (its prefix cache)
WAIT_STEP_SECONDS = 0.05  # how often a request that found every deployment full looks again
LONG_PROMPT_CHARACTERS = 16_384  # (about 4,000 tokens) a session's turn this long waits for its deployment
T = TypeVar("T")


def server_failed(error: BackendError) -> bool:
    """A failure of the server, not of the request: another may serve it.
    (A refused request, a prompt too long or a cancellation would fail
    anywhere.)"""
    return error.status >= 500 or error.status in (404, 429)


def affinity_of(job: Job) -> tuple[str, ...]:
    """Whose prompts the job shares, most specific first: its client's cache
    key, its session, its prompt's first characters, its person."""
    found = [f"cache:{_digest(job.cache_key)}"] if job.cache_key else []
    if job.session:
        found.append(f"session:{job.session}")
    text = _leading(_prompt_parts(job), PREFIX_CHARACTERS)
    if text:
        found.append(f"prefix:{_digest(text)}")
    return (*found, *([f"person:{job.usage_of}"] if job.usage_of else []))


def waits_for(job: Job, affinity: tuple[str, ...]) -> tuple[str, ...]:
    """Those of its affinity names (its cache key's, its session's) whose
    deployment the job waits for while that one is full: only a prompt long
    enough that reading it again elsewhere would cost more than a short wait."""
    named = tuple(a for a in affinity if a.startswith(("cache:", "session:")))
    if not named or len(_leading(_prompt_parts(job), LONG_PROMPT_CHARACTERS)) < LONG_PROMPT_CHARACTERS:
        return ()
    return named


def _prompt_parts(job: Job) -> Iterator[str]:
    if job.prompt is not None:
        return iter(((job.prompt.system or "") + job.prompt.prompt,))
    return chain((t.name + t.description for t in job.tools), (f"{m.role}\n{m.content}\n" for m in job.messages))


def _leading(parts: Iterator[str], limit: int) -> str:
    """The first `limit` characters of the parts joined, without joining a
    long conversation whole."""
    taken, length = [], 0
    for part in parts:
        taken.append(part)
        length += len(part)
        if length >= limit:
            break
    return "".join(taken)[:limit]


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class RoutedUpstream(Backend):
    name = "routed"

    def __init__(self, model_name: str, settings: Deployments, servers: list[UpstreamBackend], redis: Redis,
                 worker_id: str, pool: str = ""):
        """`pool`: the model's (its people at work keep the room rule: deploy_pick.lua)."""
        super().__init__(model_name, settings)
        self._pool = pool
        self._servers = {d.name: server for d, server in zip(settings.deployments, servers)}
        self._targets = jobqueue.targets_of(settings.deployments)
        self._redis, self._worker_id = redis, worker_id
        self._rest = Rest(settings.cooldown, settings.max_cooldown)
        self._patience = max(s.settings.first_token_timeout for s in servers)
        self._probe_seconds = max(s.settings.connect_timeout for s in servers) * 2

    def generate(self, job: Job, cancel: Cancel | None = None) -> TextGenerator:
        affinity = affinity_of(job)
        placed, member, (first, stream) = self._on_a_deployment(
            lambda server: _opened(server.generate(job, cancel)), affinity, cancel, job.usage_of,
            waits_for(job, affinity))
        try:
            if stream is None:  # it ended without a piece: `first` is its Outcome
                return first
            yield first
            return (yield from stream)
        finally:
            jobqueue.release_deployment(self._redis, self.model_name, placed, member)

    def embed(self, spec: EmbedSpec, cancel: Cancel | None = None) -> Embedded:
        return self._whole(lambda server: server.embed(spec, cancel), cancel)

    def count_tokens(self, job: Job) -> int:
        return self._whole(lambda server: server.count_tokens(job), None)

    def _whole(self, call: Callable[[UpstreamBackend], T], cancel: Cancel | None) -> T:
        placed, member, result = self._on_a_deployment(call, (), cancel)
        jobqueue.release_deployment(self._redis, self.model_name, placed, member)
        return result

    def _on_a_deployment(self, call: Callable[[UpstreamBackend], T], affinity: tuple[str, ...],
                         cancel: Cancel | None, person: str = "", hold: tuple[str, ...] = ()) -> tuple[str, str, T]:
        """`call` on the picked deployment, and on the next after a failure of
        the server; returns the deployment, the request's in-flight member
        (still counted there: the caller releases it; it ends with the
        person, for the places they hold: fair_take.lua) and the result.
        `hold`: the affinity names whose deployment it waits for (waits_for)."""
        attempt, last_error = Attempt(f"{self._worker_id}|{uuid.uuid4().hex}|{person}", affinity, hold=hold), None
        while True:
            placed = self._place(attempt, cancel, last_error)
            sent = time.monotonic()
            try:
                result = call(self._servers[placed])
            except BackendError as error:
                if not server_failed(error):
                    jobqueue.release_deployment(self._redis, self.model_name, placed, attempt.member)
                    raise
                self._failed(placed, attempt.member, error)
                attempt, last_error = replace(attempt, tried=(*attempt.tried, placed)), error
                continue
            except BaseException:
                jobqueue.release_deployment(self._redis, self.model_name, placed, attempt.member)
                raise
            jobqueue.deployment_started(self._redis, self.model_name, placed, affinity, time.monotonic() - sent)
            if tracing.on():
                answered = {"switchboard.deployment": placed,
                            "gen_ai.response.model": self._servers[placed].settings.upstream_model}
                tracing.annotate(tracing.current(), answered)
            return placed, attempt.member, result

    def _place(self, attempt: Attempt, cancel: Cancel | None, last_error: BackendError | None) -> str:
        """The deployment for the request's next attempt; while every one is
        full, it waits for room (the fair queue holds jobs back while all are
        full: this is only for a request that lost a race, or failed over).
        A session's turn waits in line for the deployment holding its
        conversation, for at most `affinity_wait`, while that one is full."""
        started = time.monotonic()
        try:
            while True:
                if attempt.hold and time.monotonic() - started >= self.settings.affinity_wait:
                    attempt = replace(attempt, hold=())
                pick = jobqueue.pick_deployment(self._redis, self.model_name, self._targets, attempt,
                                                self._probe_seconds, self._pool)
                if pick.probe:
                    self._start_probe(pick.probe)
                if pick.deployment:
                    return pick.deployment
                if pick.how == "none":  # every deployment failed this request
                    raise last_error or BackendError(f'model "{self.model_name}" has no deployment left to try', 502)
                if time.monotonic() - started > self._patience:
                    raise BackendError(f'every server of model "{self.model_name}" stayed busy', 503, 1)
                if cancel is not None and cancel.wait(WAIT_STEP_SECONDS):
                    raise BackendError("cancelled", 499)
                if cancel is None:
                    time.sleep(WAIT_STEP_SECONDS)
        except BaseException:
            jobqueue.leave_deployment_lines(self._redis, self.model_name, self._targets, attempt.member)
            raise

    def _failed(self, placed: str, member: str, error: BackendError) -> None:
        rest = self._rest if error.retry_after is None else Rest(self._rest.first, self._rest.most, error.retry_after)
        seconds = jobqueue.deployment_failed(self._redis, self.model_name, placed, member, rest)
        log.warning('model "%s": deployment %s failed before the first token (%s); it rests %.1f s, and the '
                    "request goes to another", self.model_name, placed, error.message, seconds)

    def _start_probe(self, name: str) -> None:
        threading.Thread(target=self._probe, args=(name,), name=f"probe {name}", daemon=True).start()

    def _probe(self, name: str) -> None:
        healthy = self._servers[name].healthy()
        jobqueue.deployment_probed(self._redis, self.model_name, name, healthy, self._rest)
        log.warning('model "%s": deployment %s %s', self.model_name, name,
                    "answers again" if healthy else "still fails; it rests longer")


def _opened(stream: TextGenerator) -> tuple[object, TextGenerator | None]:
    """A reply's first piece, read: the request's failures before its first
    token happen here. (Its Outcome and None if it had no piece.)"""
    try:
        return next(stream), stream
    except StopIteration as end:
        return end.value, None
