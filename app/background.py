"""Background responses (`background: true` on POST /v1/responses): long
work that outlives the client's connection.

The view admits and queues the job as any other (a refusal keeps its
status), stores the response `queued`, and answers at once; a greenlet of
its web process then drains the job's events through the Responses writer,
appending each event to the response's event log in Redis (a stream whose
entry `0-<n+1>` is the event of sequence number n) and keeping the stored
response's status current. Nobody's connection holds the job: it runs until
it ends or its owner cancels it, and it counts against its person's limits
while it runs. `GET /v1/responses/{id}?stream=true&starting_after=N` reads
the log from N+1 (the live stream of `stream: true` is the same read, from
the start), so a client that lost its stream resumes without a gap or a
repeat: XREAD BLOCK from the last entry read, on a connection of the
stream's own (a blocked read must not hold one of the pool every request
shares), each event framed by app/streaming's sse(). The log lives as long
as the stored response.

A web process that stops ends its drains at the end of its grace period
(the response fails, retryable); one that dies leaves a response that
never ends, so a reader (or a poll) that finds its drainer's lease gone
fails it then.
"""
from __future__ import annotations

import json
import logging
import time
from typing import Callable, Iterator

import gevent
from redis import Redis
from redis.client import Pipeline
from redis.exceptions import RedisError

import jobqueue
from app import stored_responses
from app.jobs import JobRun, submit_job
from app.services import Services
from app.streaming import frame_groups, sse, to_json
from catalog.registry import ModelEntry
from dialects.responses_writer import ResponsesWriter
from dialects.writer import KEEPALIVE_COMMENT, NamedEvent
from protocol import keys
from protocol.contract import Job
from protocol.events import ErrorEvent
from protocol.errors import InvalidRequest
from protocol.presence import publish_event

log = logging.getLogger(__name__)

BLOCK_MS = 1000  # a replay's longest wait on the log before it checks that its response still runs
TERMINAL_EVENTS = {"response.completed", "response.incomplete", "response.failed"}
TERMINAL = {"completed", "incomplete", "failed", "cancelled"}
CANCELLED = "cancelled by its owner"  # the message a drain ends on when its response was cancelled
STOPPED = ("the server running this background response stopped before it finished; create it again",
           "server_error")


# --- starting and draining -----------------------------------------------------------------
def start(shared: Services, job: Job, entry: ModelEntry, writer: ResponsesWriter,
          keep: Callable[[Pipeline, dict], None]) -> dict:
    """Queue the job (a refusal is raised here, before anything is kept),
    keep the response (`keep`) and its `response.created`, and drain it in a
    greenlet. The response as it is now (`queued`)."""
    run = submit_job(job, entry, watch_client=False)
    created, ttl_seconds = writer.queued()[0], shared.settings.responses_ttl_seconds
    response_id, redis = writer.response["id"], shared.redis
    try:
        with redis.pipeline(transaction=False) as pipe:
            keep(pipe, created.body["response"])
            pipe.hset(keys.background_key(response_id), mapping={
                "job": job.id, "web": job.web_id, "channel": job.reply_channel})
            pipe.expire(keys.background_key(response_id), ttl_seconds)
            _append(pipe, response_id, created, ttl_seconds)
            pipe.execute()
    except BaseException:
        run.close()
        raise
    gevent.spawn(_drain, shared, run, writer, ttl_seconds)
    return created.body["response"]


def _append(redis, response_id: str, frame: NamedEvent, ttl_seconds: int) -> None:
    key = keys.response_events_key(response_id)
    redis.xadd(key, {"event": to_json(frame.body)}, id=f"0-{frame.body['sequence_number'] + 1}")
    redis.expire(key, ttl_seconds)


def _drain(shared: Services, run: JobRun, writer: ResponsesWriter, ttl_seconds: int) -> None:
    response_id, redis = writer.response["id"], shared.redis
    try:
        for group in frame_groups(run.events(), writer):
            events = [frame for frame in group if isinstance(frame, NamedEvent)]
            if _was_cancelled(redis, response_id, run):
                return
            with redis.pipeline(transaction=False) as pipe:
                for frame in events:
                    _append(pipe, response_id, frame, ttl_seconds)
                pipe.execute()
            _keep_status(redis, response_id, events)
    except RedisError as error:
        log.warning("background response %s: its events could not be kept (%s)", response_id, error)
    finally:
        run.close()


def _was_cancelled(redis: Redis, response_id: str, run: JobRun) -> bool:
    """Its owner cancelled it (the drain's last event says so): nothing more
    is logged, and it counts as aborted, not as an error."""
    final = run.final
    if isinstance(final, ErrorEvent) and final.message == CANCELLED and \
            redis.hget(keys.background_key(response_id), "cancelled") is not None:
        run.final = None
        return True
    return False


def _keep_status(redis: Redis, response_id: str, events: list[NamedEvent]) -> None:
    """The stored response follows its events: in progress, then its end."""
    with_response = [frame.body["response"] for frame in events if "response" in frame.body]
    if with_response:
        stored_responses.replace_response(redis, response_id, with_response[-1])


# --- cancelling, and a drain that died ----------------------------------------------------------
def cancel(redis: Redis, owner: str, response_id: str) -> dict:
    """Cancel a background response still running (its job aborted and its
    drain ended wherever it runs); one that ended is answered as it is."""
    response = stored_responses.load(redis, owner, response_id)
    run = redis.hgetall(keys.background_key(response_id))
    if not run:
        raise InvalidRequest("only responses created with background: true can be cancelled")
    if response["status"] in TERMINAL:
        return response
    response = response | {"status": "cancelled"}
    redis.hset(keys.background_key(response_id), "cancelled", "1")
    stored_responses.replace_response(redis, response_id, response)
    jobqueue.abort(redis, run[b"job"].decode())
    publish_event(redis, run[b"channel"].decode(), ErrorEvent(message=CANCELLED, status=499))
    return response


def current(redis: Redis, owner: str, response_id: str) -> dict:
    """The stored response, failed first if it was left running by a web
    process that is gone."""
    response = stored_responses.load(redis, owner, response_id)
    if response["status"] in TERMINAL or response.get("background") is not True:
        return response
    run = redis.hgetall(keys.background_key(response_id))
    if run and not redis.exists(keys.web_lease_key(run[b"web"].decode())):
        response = response | {"status": "failed", "error": {"message": STOPPED[0], "code": STOPPED[1]}}
        stored_responses.replace_response(redis, response_id, response)
    return response


# --- reading the log ------------------------------------------------------------------------------
def events_after(shared: Services, owner: str, response_id: str, after: int) -> Iterator[bytes]:
    """The response's events after sequence number `after`, as the SSE
    frames of its live stream, as they come, until its end; a keep-alive
    comment while it is silent. (Its owner's only, and a background one's:
    both checked before the first.) Read on a connection of its own, closed
    at its end."""
    redis = shared.redis
    current(redis, owner, response_id)
    if not redis.exists(keys.background_key(response_id)):
        raise InvalidRequest("stream: only a response created with background: true can be streamed again",
                             param="stream")
    reader = shared.dedicated_connection()
    try:
        yield from _replay(reader, keys.response_events_key(response_id), after, shared.settings.keepalive_seconds,
                           lambda: current(redis, owner, response_id)["status"] in TERMINAL)
    finally:
        reader.connection_pool.disconnect()


def _replay(reader: Redis, log_key: str, after: int, keepalive_seconds: float, ended: Callable[[], bool]
            ) -> Iterator[bytes]:
    last, spoke = f"0-{after + 1}", time.monotonic()
    while True:
        read = reader.xread({log_key: last}, block=BLOCK_MS)
        for entry_id, fields in read[0][1] if read else ():
            last, spoke, body = entry_id, time.monotonic(), json.loads(fields[b"event"])
            yield sse(NamedEvent(body["type"], body))
            if body["type"] in TERMINAL_EVENTS:
                return
        if not read:
            if ended():
                return  # cancelled, or its drain died: it has nothing more to say
            if time.monotonic() - spoke > keepalive_seconds:
                spoke = time.monotonic()
                yield sse(KEEPALIVE_COMMENT)
