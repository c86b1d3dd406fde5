"""The contract between the MCP pool, the one holder of sessions with the
operator's MCP servers, and its callers: web processes (the MCP gateway)
and workers (server-side tools).

A client's MCP request that needs an upstream server (a listing, a tool
call, a resource read, a prompt), and a model's server-side tool call (a
worker's, workers/toolbox.py), becomes one `Call`, pushed on the
`keys.MCP_CALLS` list; an MCP pool process (workers/mcp/pool.py) takes it,
asks its session with that server, and publishes `Reply` messages on the
call's `reply_channel` (the web relay's, as a job's events are): progress
notifications while it runs, then one result or error. A call whose
deadline passed before a pool process took it is answered with an error at
once; one nobody listens to any more (PUBLISH reaches no one) is cancelled
on its server. A web process cancels a call by publishing its id on
`keys.mcp_cancel_channel()`.

Nothing secret travels here: a person's own credentials are named by the
environment variables that hold them (on the pool's machine), never sent;
their tokens on an OAuth server (identity/mcp_accounts.py) are read, sealed,
by the pool itself.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Callable, Literal

from redis import Redis

from protocol import keys

# The MCP methods a call may carry to an upstream server.
UPSTREAM_METHODS = frozenset({
    "tools/list", "tools/call", "resources/list", "resources/templates/list", "resources/read",
    "prompts/list", "prompts/get", "completion/complete"})

# JSON-RPC error codes the gateway answers with beside the standard ones.
SERVER_UNAVAILABLE = -32002  # the upstream server cannot be reached (or no pool process took the call)
CALL_TIMEOUT = -32001  # the upstream server did not answer within its timeout_seconds (the SDK's REQUEST_TIMEOUT)

# The person has not connected their own account on a server whose tools act as them (auth = "oauth"): the
# 2025-11-25 spec's URLElicitationRequiredError, its URL where they connect it.
NOT_CONNECTED = -32042


def connect_url(root: str, server: str) -> str:
    """Where a person connects their account on the server (`root`: the public URL they reached us at)."""
    return f"{root}/me/mcp/{server}/connect"


def not_connected(server: str, root: str) -> str:
    return (f'the MCP server "{server}" acts as you, with your own account there, which you have not connected: '
            f"open {connect_url(root, server)} to connect it, then try again")


# The outcome a call's JSON-RPC error is recorded as (jobqueue.tool_call_ended), whoever made the call;
# invalid params (-32602) from a server: it has no such tool.
_OUTCOMES = {CALL_TIMEOUT: "timeout", SERVER_UNAVAILABLE: "unavailable", -32602: "unknown",
             NOT_CONNECTED: "not_connected"}


def error_outcome(code: int) -> str:
    return _OUTCOMES.get(code, "error")


POOL_HEARD_SECONDS = 5.0  # an MCP pool process unheard of for this long is gone
NO_POOL = "no MCP pool process is running (the Procfile's `mcp`: python -m workers.mcp.pool)"


def pool_heard(redis: Redis) -> bool:
    """Whether an MCP pool process announced itself lately."""
    return redis.zcount(keys.MCP_POOLS, time.time() - POOL_HEARD_SECONDS, "+inf") > 0


def pool_answers(redis: Redis, pause: Callable[[float], object], patience: float = 2.0) -> bool:
    """Whether an MCP pool process was heard of lately; one starting (or whose
    presence Redis lost a moment ago) is waited for `patience` seconds, with
    `pause` between looks (a web process's greenlet sleeps; a worker's wait
    raises once its job is cancelled)."""
    deadline = time.monotonic() + patience
    while not pool_heard(redis):
        if time.monotonic() > deadline:
            return False
        pause(0.2)
    return True


def cancel(redis: Redis, call_id: str) -> None:
    """The call's caller no longer waits: the pool process running it cancels it on its server."""
    redis.publish(keys.mcp_cancel_channel(), call_id)


@dataclass(frozen=True)
class Call:
    id: str
    server: str
    method: str  # one of UPSTREAM_METHODS
    params: dict
    person: str  # whose call: a per-person server's process, the request log
    reply_channel: str
    deadline: float  # epoch seconds: the caller waits no longer
    own_headers_env: dict[str, str] = field(default_factory=dict)  # header -> variable: the person's credentials
    traceparent: str = ""

    def to_json(self) -> str:
        return json.dumps(self.__dict__, separators=(",", ":"))  # (asdict would deep-copy the params first)

    @classmethod
    def from_json(cls, data: str | bytes) -> "Call":
        return cls(**json.loads(data))


@dataclass(frozen=True)
class Reply:
    kind: Literal["progress", "result", "error"]
    body: dict  # progress: the notification's params; result: the MCP result; error: {code, message}

    def to_json(self) -> str:
        return json.dumps({"kind": self.kind, "body": self.body}, separators=(",", ":"))

    @classmethod
    def from_json(cls, data: str | bytes) -> "Reply":
        value = json.loads(data)
        return cls(value["kind"], value["body"])

    @classmethod
    def error(cls, code: int, message: str) -> "Reply":
        return cls("error", {"code": code, "message": message})
