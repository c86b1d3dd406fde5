"""A model's server-side tools, run by the MCP pool (workers/mcp/pool.py):
the one holder of sessions with the operator's MCP servers, the same that
runs agents' calls through the MCP gateway. A Celery worker opens none.

Each call is a `protocol.gateway.Call` on the pool's list, as a gateway
call is: admitted against the person's rates in the same round trip
(jobqueue.admit_tool_call; without a slot, which the job holds), carrying
the person's own credentials (the variables' names) and its job's trace;
its reply comes back on a channel of this worker's. A round's calls run
at once. The listing a job is offered is asked of the pool too (its
sessions' cached listings); it is counted by the job's own admission.

Nothing a call can do reaches past this module as an exception, except the
job's own cancellation (concurrent.futures.CancelledError; its calls are
cancelled on their servers): a failing tool, a timeout, a server or pool
that is down, a rate reached, all become a result worded for the model.
"""
from __future__ import annotations

import json
import logging
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
    CALL_TIMEOUT, NO_POOL, SERVER_UNAVAILABLE, Call, Reply, cancel, error_outcome, pool_heard,
)
from workers.cancel import Cancel

log = logging.getLogger(__name__)

REPLY_GRACE_SECONDS = 5.0  # beyond a server's own timeouts, for the pool to answer
POLL_SECONDS = 0.2  # how often a wait looks at its job's cancellation
POOL_PATIENCE_SECONDS = 2.0  # a pool process starting (or just restarted) is waited for this long


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


class Toolbox:
    def __init__(self, redis: Redis, servers: dict[str, McpServer], worker_id: str):
        self._redis, self._servers, self._worker_id = redis, servers, worker_id

    def offered(self, server_names: list[str], job: Job, cancel: Cancel | None = None) -> list[ServerTool]:
        """The tools of these servers, in order, as the job's person sees
        them; a name offered by two servers goes to the one listed first.
        A server that cannot be listed offers none."""
        names = [name for name in server_names if name in self._servers]
        replies = self._ask([(name, "tools/list", {}) for name in names], job, cancel) if names else []
        tools: dict[str, ServerTool] = {}
        for server, (reply, _) in zip(names, replies):
            for tool in reply.body.get("tools", []) if reply.kind == "result" else []:
                tools.setdefault(tool["name"], ServerTool(server, ToolSpec(
                    name=tool["name"], description=tool.get("description") or "",
                    parameters=tool.get("inputSchema") or {})))
        return list(tools.values())

    def call_all(self, calls: list[tuple[ServerTool, dict]], job: Job, cancel: Cancel | None = None
                 ) -> list[ToolResult]:
        """Run the calls at once; results in the calls' order."""
        asked = [(tool.server, "tools/call", {"name": tool.spec.name, "arguments": arguments})
                 for tool, arguments in calls]
        return [self._result(tool, reply, seconds) for (tool, _), (reply, seconds)
                in zip(calls, self._ask(asked, job, cancel, metered=True))]

    def _result(self, tool: ServerTool, reply: Reply, seconds: float) -> ToolResult:
        server = self._servers[tool.server]
        if reply.kind == "result":
            text, outcome = result_text(reply.body), "error" if reply.body.get("isError") else "ok"
        else:
            code, message = int(reply.body.get("code", SERVER_UNAVAILABLE)), str(reply.body.get("message", ""))
            outcome = "refused" if reply.body.get("refused") else error_outcome(code)
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
        pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
        try:
            calls = [self._call(server, method, params, job) for server, method, params in asked]
            pubsub.subscribe(*(call.reply_channel for call in calls))
            replies = {call.id: refusal for call in calls
                       if (refusal := self._queue(call, job, metered)) is not None}
            return self._replies(pubsub, calls, replies, started, cancel)
        finally:
            pubsub.close()

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

    def _replies(self, pubsub, calls: list[Call], replies: dict, started: float, cancel: Cancel | None
                 ) -> list[tuple[Reply, float]]:
        waiting = {call.reply_channel: call for call in calls if call.id not in replies}
        deadline = started + max((c.deadline - time.time() for c in waiting.values()), default=0) + REPLY_GRACE_SECONDS
        while waiting:
            if cancel is not None and cancel.is_set():
                self._cancel(list(waiting.values()))
                raise CancelledError()
            if time.monotonic() > deadline:
                self._cancel(list(waiting.values()))
                late = Reply.error(CALL_TIMEOUT, "the MCP pool did not answer in time; the call was cancelled")
                replies |= {call.id: (late, time.monotonic() - started) for call in waiting.values()}
                break
            message = pubsub.get_message(timeout=POLL_SECONDS)
            call = waiting.get(_text(message["channel"])) if message is not None else None
            reply = Reply.from_json(message["data"]) if call is not None else None
            if reply is not None and reply.kind != "progress":
                replies[call.id] = (reply, time.monotonic() - started)
                del waiting[call.reply_channel]
        return [replies[call.id] for call in calls]

    def _pool_alive(self, cancel: Cancel | None) -> bool:
        waited_until = time.monotonic() + POOL_PATIENCE_SECONDS
        while not pool_heard(self._redis):
            if time.monotonic() > waited_until:
                return False
            if cancel is not None and cancel.wait(POLL_SECONDS):
                raise CancelledError()
            if cancel is None:
                time.sleep(POLL_SECONDS)
        return True

    def _cancel(self, calls: list[Call]) -> None:
        for call in calls:
            try:
                cancel(self._redis, call.id)
            except RedisError:
                pass


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
