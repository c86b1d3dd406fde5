"""A model's server-side tools, run by the MCP pool (workers/mcp/pool.py):
the one holder of sessions with the operator's MCP servers, the same that
runs agents' calls through the MCP gateway. A Celery worker opens none.

Each call is a `protocol.gateway.Call` on the pool's list, as a gateway
call is: admitted against the person's rates in the same round trip
(jobqueue.admit_tool_call; without a slot, which the job holds), carrying
the person's own credentials (the variables' names) and its job's trace;
its reply comes back on a channel of this worker's (one subscription per
worker process, for every call). A round's calls run at once. The listing
a job is offered is asked of the pool too (its sessions' cached listings,
kept here for LISTING_SECONDS); it is counted by the job's own admission.

Nothing a call can do reaches past this module as an exception, except the
job's own cancellation (concurrent.futures.CancelledError; its calls are
cancelled on their servers): a failing tool, a timeout, a server or pool
that is down, a rate reached, all become a result worded for the model.
"""
from __future__ import annotations

import json
import logging
import queue
import threading
import time
import uuid
from concurrent.futures import CancelledError
from dataclasses import dataclass

from redis import Redis
from redis.exceptions import RedisError

import jobqueue
from catalog.mcp import McpServer
from protocol import keys
from protocol.contract import Job, ToolSpec
from protocol.gateway import (
    CALL_TIMEOUT, NO_POOL, NOT_CONNECTED, SERVER_UNAVAILABLE, Call, Reply, cancel, error_outcome, not_connected,
    pool_answers,
)
from workers.cancel import Cancel

log = logging.getLogger(__name__)

REPLY_GRACE_SECONDS = 5.0  # beyond a server's own timeouts, for the pool to answer
POLL_SECONDS = 0.2  # how often a wait looks at its job's cancellation
POOL_PATIENCE_SECONDS = 2.0  # a pool process starting (or just restarted) is waited for this long
LISTING_SECONDS = 2.0  # a server's tool listing, as a person sees it, is asked of the pool again after this long
MOST_LISTINGS = 1000  # listings kept before the expired ones are dropped


@dataclass(frozen=True)
class ServerTool:
    server: str
    spec: ToolSpec


@dataclass(frozen=True)
class ToolResult:
    text: str
    outcome: str  # as recorded (jobqueue.tool_call_ended): ok, error, timeout, unavailable, unknown, refused
    seconds: float
    result_chars: int = 0
    truncated: bool = False

    @property
    def status(self) -> str:
        """As the client's events show it: ok, timeout or error."""
        return self.outcome if self.outcome in ("ok", "timeout") else "error"


def _content_text(item: dict) -> str:
    kind = item.get("type")
    if kind == "text":
        return str(item.get("text", ""))
    if kind == "resource" and isinstance(item.get("resource"), dict) and "text" in item["resource"]:
        return str(item["resource"]["text"])
    if kind == "resource_link":
        return f"[resource: {item.get('uri', '')}]"
    return f"[{kind or 'content'} omitted: {item.get('mimeType') or 'binary'}]"


def result_text(result: dict) -> str:
    """A tool's result (MCP's CallToolResult, as JSON) as the model reads
    it: its text parts (other parts named), or its structured content as
    JSON when it has no parts."""
    if result.get("content"):
        return "\n".join(_content_text(item) for item in result["content"] if isinstance(item, dict))
    if result.get("structuredContent") is not None:
        return json.dumps(result["structuredContent"], ensure_ascii=False)
    return ""


def limited(text: str, limit: int) -> tuple[str, bool]:
    if len(text) <= limit:
        return text, False
    return f"{text[:limit]}\n[result truncated: the first {limit} of {len(text)} characters]", True


class _Replies:
    """This worker process's one subscription to its replies (every reply
    channel under its id, one pattern), read by a thread of its own that
    hands each reply to the call waiting for it: a call costs no subscribe,
    unsubscribe or connection of its own. Started on first use (after any
    fork); a lost subscription is made again, and a reply published
    meanwhile is lost (its call times out)."""

    def __init__(self, redis: Redis, worker_id: str):
        self._redis, self._pattern = redis, keys.reply_pattern(worker_id)
        self._waiting: dict[str, queue.Queue] = {}
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._listener: threading.Thread | None = None
        self._stopping = threading.Event()

    def expect(self, call_ids: list[str]) -> queue.Queue:
        """Where the calls' replies will be put, as (call id, data), from now on."""
        self._start()
        replies: queue.Queue = queue.Queue()
        self._waiting.update((call_id, replies) for call_id in call_ids)
        return replies

    def forget(self, call_ids: list[str]) -> None:
        for call_id in call_ids:
            self._waiting.pop(call_id, None)

    def _start(self) -> None:
        """One listener per process; a call waits for its subscription's confirmation (Redis away: a while)."""
        with self._lock:
            if self._listener is None:
                self._listener = threading.Thread(target=self._listen_forever, name="tool-replies", daemon=True)
                self._listener.start()
        self._ready.wait(10)

    def stop(self) -> None:
        """The listener ends within a second (a worker's never does: it lives as long as its process)."""
        self._stopping.set()

    def _listen_forever(self) -> None:
        while not self._stopping.is_set():
            pubsub = self._redis.pubsub()
            try:
                pubsub.psubscribe(self._pattern)
                while not self._stopping.is_set():
                    message = pubsub.get_message(timeout=1.0)
                    if message is not None and message["type"] == "psubscribe":
                        self._ready.set()  # (confirmed: every reply from now on reaches it)
                    elif message is not None and message["type"] == "pmessage":
                        self._hand(message)
            except (RedisError, OSError, ValueError) as error:  # (ValueError: its socket closed under it)
                log.warning("server-side tools: the replies' subscription failed (%s); subscribing again",
                            type(error).__name__)
                time.sleep(POLL_SECONDS)
            finally:
                pubsub.close()

    def _hand(self, message: dict) -> None:
        call_id = keys.job_of_channel(_text(message["channel"]))
        waiting = self._waiting.get(call_id)
        if waiting is not None:
            waiting.put((call_id, message["data"]))


class Toolbox:
    def __init__(self, redis: Redis, servers: dict[str, McpServer], worker_id: str):
        self._redis, self._servers, self._worker_id = redis, servers, worker_id
        self._replies = _Replies(redis, worker_id)
        self._listings: dict[tuple, tuple[float, Reply]] = {}  # (server, whose session) -> (when, its listing)

    def offered(self, server_names: list[str], job: Job, cancel: Cancel | None = None) -> list[ServerTool]:
        """The tools of these servers, in order, as the job's person sees
        them; a name offered by two servers goes to the one listed first.
        A server that cannot be listed offers none. A listing is kept for
        LISTING_SECONDS (the pool's own follows the server's changes)."""
        names = [name for name in server_names if name in self._servers]
        listings = self._listed(names, job, cancel)
        tools: dict[str, ServerTool] = {}
        for server in names:
            reply = listings[server]
            for tool in reply.body.get("tools", []) if reply.kind == "result" else []:
                tools.setdefault(tool["name"], ServerTool(server, ToolSpec(
                    name=tool["name"], description=tool.get("description") or "",
                    parameters=tool.get("inputSchema") or {})))
        return list(tools.values())

    def _listed(self, names: list[str], job: Job, cancel: Cancel | None) -> dict[str, Reply]:
        now, whose = time.monotonic(), {name: self._whose(name, job) for name in names}
        kept = {name: self._listings.get(whose[name]) for name in names}
        listings = {name: held[1] for name, held in kept.items() if held and now - held[0] < LISTING_SECONDS}
        missing = [name for name in names if name not in listings]
        for name, (reply, _) in zip(missing, self._ask([(n, "tools/list", {}) for n in missing], job, cancel)
                                    if missing else []):
            listings[name] = reply
            if reply.kind == "result":
                self._keep(whose[name], now, reply)
        return listings

    def _keep(self, whose: tuple, now: float, listing: Reply) -> None:
        if len(self._listings) >= MOST_LISTINGS:  # (people come and go: the expired ones go first)
            self._listings = {k: held for k, held in self._listings.items() if now - held[0] < LISTING_SECONDS}
        self._listings[whose] = (now, listing)

    def _whose(self, server: str, job: Job) -> tuple:
        """Whose session with the server a listing comes from (as the pool keeps them: workers/mcp/pool.py)."""
        person, own = self._servers[server].session_of(job.usage_of, job.tool_credentials.get(server, {}))
        return server, person, tuple(sorted(own.items()))

    def close(self) -> None:
        self._replies.stop()

    def call_all(self, calls: list[tuple[ServerTool, dict]], job: Job, cancel: Cancel | None = None
                 ) -> list[ToolResult]:
        """Run the calls at once; results in the calls' order."""
        asked = [(tool.server, "tools/call", {"name": tool.spec.name, "arguments": arguments})
                 for tool, arguments in calls]
        return [self._result(tool, reply, seconds, job.tool_root) for (tool, _), (reply, seconds)
                in zip(calls, self._ask(asked, job, cancel, metered=True))]

    def _result(self, tool: ServerTool, reply: Reply, seconds: float, root: str = "") -> ToolResult:
        server = self._servers[tool.server]
        if reply.kind == "result":
            text, outcome = result_text(reply.body), "error" if reply.body.get("isError") else "ok"
        else:
            code, message = int(reply.body.get("code", SERVER_UNAVAILABLE)), str(reply.body.get("message", ""))
            outcome = "refused" if reply.body.get("refused") else error_outcome(code)
            if code == NOT_CONNECTED:  # (the model tells its person where to connect)
                message = not_connected(tool.server, root)
            text = f'Error: the tool "{tool.spec.name}" did not answer within {server.timeout_seconds:g} s and ' \
                   "was cancelled." if code == CALL_TIMEOUT else f"Error: {message.rstrip('.')}."
        shown, truncated = limited(text, server.max_result_chars)
        return ToolResult(shown, outcome, seconds, len(text), truncated)

    # --- the pool's side ------------------------------------------------------------
    def _ask(self, asked: list[tuple[str, str, dict]], job: Job, cancel: Cancel | None,
             metered: bool = False) -> list[tuple[Reply, float]]:
        """Each (server, method, params) asked of the pool: its reply and how long it took."""
        started = time.monotonic()
        if not self._pool_alive(cancel):
            return [(Reply.error(SERVER_UNAVAILABLE, NO_POOL), 0.0)] * len(asked)
        calls = [self._call(server, method, params, job) for server, method, params in asked]
        ids = [call.id for call in calls]
        arriving = self._replies.expect(ids)
        try:
            replies = {call.id: refusal for call in calls
                       if (refusal := self._queue(call, job, metered)) is not None}
            return self._replies_of(arriving, calls, replies, started, cancel)
        finally:
            self._replies.forget(ids)

    def _call(self, server: str, method: str, params: dict, job: Job) -> Call:
        entry, call_id = self._servers[server], uuid.uuid4().hex
        return Call(call_id, server, method, params, job.usage_of, keys.reply_channel(self._worker_id, call_id),
                    time.time() + entry.timeout_seconds + entry.connect_timeout_seconds,
                    job.tool_credentials.get(server, {}), job.traceparent)

    def _queue(self, call: Call, job: Job, metered: bool) -> tuple[Reply, float] | None:
        """On the pool's list (admitted first if `metered`); a refusal's reply if it was not."""
        if not metered or not job.tool_rates:
            self._redis.rpush(keys.MCP_CALLS, call.to_json())
            return None
        try:
            jobqueue.admit_tool_call(self._redis, job.usage_of, f"server-tool|{call.id}", tuple(job.tool_rates),
                                     call.to_json(), hold=False)
        except jobqueue.Busy as busy:
            message = f"{busy.message}; try again in {busy.retry_after} s"
            return Reply("error", {"code": -32000, "message": message, "refused": True}), 0.0
        return None

    def _replies_of(self, arriving: queue.Queue, calls: list[Call], replies: dict, started: float,
                    cancel: Cancel | None) -> list[tuple[Reply, float]]:
        waiting = {call.id: call for call in calls if call.id not in replies}
        deadline = started + max((c.deadline - time.time() for c in waiting.values()), default=0) + REPLY_GRACE_SECONDS
        while waiting:
            if cancel is not None and cancel.is_set():
                self._cancel(list(waiting.values()))
                raise CancelledError()
            if time.monotonic() > deadline:
                self._cancel(list(waiting.values()))
                late = Reply.error(CALL_TIMEOUT, "the MCP pool did not answer in time; the call was cancelled")
                replies |= {call_id: (late, time.monotonic() - started) for call_id in waiting}
                break
            try:
                call_id, data = arriving.get(timeout=POLL_SECONDS)
            except queue.Empty:
                continue
            reply = Reply.from_json(data)
            if reply.kind != "progress" and call_id in waiting:
                replies[call_id] = (reply, time.monotonic() - started)
                del waiting[call_id]
        return [replies[call.id] for call in calls]

    def _pool_alive(self, cancel: Cancel | None) -> bool:
        def pause(seconds: float) -> None:
            if cancel is None:
                time.sleep(seconds)
            elif cancel.wait(seconds):
                raise CancelledError()
        return pool_answers(self._redis, pause, POOL_PATIENCE_SECONDS)

    def _cancel(self, calls: list[Call]) -> None:
        for call in calls:
            try:
                cancel(self._redis, call.id)
            except RedisError:
                pass


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
