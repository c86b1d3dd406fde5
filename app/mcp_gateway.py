"""The web process's side of the MCP gateway: it holds no MCP client and
starts no server (import-linter keeps `mcp` out of app/). A request that
needs an upstream server becomes a call to the MCP pool (protocol/gateway.py)
whose replies come back through this process's relay, as a job's events do.

Sessions of the session era live in Redis (`keys.mcp_session_key`), not in
this process: any web process serves any session, and a restart of one
loses none. A stateless-era client has no session at all.
"""
from __future__ import annotations

import json
import logging
import secrets
import time
import uuid
from dataclasses import dataclass
from typing import Callable

import gevent
from gevent.queue import Empty
from redis.exceptions import RedisError

from app.disconnect import DisconnectWatch
from app.relay import CLOSED
from app.services import Services
from catalog.mcp import Grants
from dialects.mcp import LISTINGS, Names, RpcError
from protocol import keys
from protocol.gateway import (
    CALL_TIMEOUT, NO_POOL, NOT_CONNECTED, SERVER_UNAVAILABLE, Call, Reply, cancel, connect_url, not_connected,
    pool_answers,
)

log = logging.getLogger(__name__)

SESSION_IDLE_SECONDS = 24 * 3600  # a session unused this long is forgotten (its client initializes again)
# What a web process waits beyond the server's own timeouts for the pool's answer (which ends the call at them).
REPLY_GRACE_SECONDS = 5.0


class ClientLeft(Exception):
    """The client went away (or the relay lost Redis) while its call ran."""


@dataclass(frozen=True)
class Endpoint:
    """What one key reaches through one endpoint: `/mcp` (every server it may
    use) or `/mcp/<server>`."""

    names: Names
    grants: Grants

    @classmethod
    def of(cls, registry_servers: list[str], grants: Grants, server: str | None) -> "Endpoint | None":
        """None: no such server here, for this key (one answer for both)."""
        reachable = [name for name in registry_servers if grants.may_use_server(name)]
        if server is None:
            return cls(Names(tuple(reachable), single=False), grants)
        return cls(Names((server,), single=True), grants) if server in reachable else None

    def tool_allowed(self, server: str, tool: str) -> bool:
        return self.grants.may_use(server, tool)

    def listed(self, server: str, item: dict) -> bool:
        """A listed tool the key may call; any other item (a resource, a
        prompt) only from a server the key may use whole."""
        if "inputSchema" in item:
            return self.tool_allowed(server, item.get("name", ""))
        return self.grants.whole_server(server)


MOST_SESSIONS = 32  # a person's open session-era sessions, however many agents and endpoints they use


class Sessions:
    """Session-era sessions: an unguessable id -> whose it is and where."""

    def __init__(self, redis):
        self.redis = redis

    def open(self, person: str, endpoint: str, version: str, client: dict, url_elicitation: bool = False) -> str:
        """A new session; a person holds at most MOST_SESSIONS (opening one more ends their oldest: a client
        that never says DELETE costs its own person a session, never the server its memory)."""
        session_id, now = secrets.token_urlsafe(24), time.time()
        fields = {"person": person, "endpoint": endpoint, "version": version, "created": now,
                  "client": json.dumps(client)[:500], "url_elicitation": int(url_elicitation)}
        held = keys.mcp_sessions_key(person)
        with self.redis.pipeline(transaction=False) as pipe:
            pipe.hset(keys.mcp_session_key(session_id), mapping=fields)
            pipe.expire(keys.mcp_session_key(session_id), SESSION_IDLE_SECONDS)
            pipe.zadd(held, {session_id: now})
            pipe.expire(held, SESSION_IDLE_SECONDS)
            pipe.zrange(held, 0, -MOST_SESSIONS - 1)
            oldest = pipe.execute()[-1]
        if oldest:
            for old in oldest:
                self.close(old.decode())
            self.redis.zrem(held, *oldest)
        return session_id

    def find(self, session_id: str, person: str, endpoint: str) -> dict | None:
        """The session, if it is this person's on this endpoint (its idle time starts again)."""
        if not session_id or len(session_id) > 100:
            return None
        with self.redis.pipeline(transaction=False) as pipe:
            pipe.hgetall(keys.mcp_session_key(session_id))
            pipe.expire(keys.mcp_session_key(session_id), SESSION_IDLE_SECONDS)
            found, _ = pipe.execute()
        session = {k.decode(): v.decode() for k, v in found.items()}
        if session.get("person") != person or session.get("endpoint") != endpoint:
            return None
        return session

    def close(self, session_id: str) -> None:
        self.redis.delete(keys.mcp_session_key(session_id), keys.mcp_session_calls_key(session_id))

    def running(self, session_id: str, request_id, call_id: str | None) -> None:
        """Note (or forget) the call a session's request runs, for its cancellation."""
        key = keys.mcp_session_calls_key(session_id)
        if call_id is None:
            self.redis.hdel(key, json.dumps(request_id))
            return
        with self.redis.pipeline(transaction=False) as pipe:
            pipe.hset(key, json.dumps(request_id), call_id)
            pipe.expire(key, SESSION_IDLE_SECONDS)
            pipe.execute()

    def call_of(self, session_id: str, request_id) -> str | None:
        found = self.redis.hget(keys.mcp_session_calls_key(session_id), json.dumps(request_id))
        return found.decode() if found else None


@dataclass
class Hooks:
    """What a request hears of its calls to the pool."""

    on_progress: Callable[[dict], None] | None = None  # each progress notification's params
    on_start: Callable[[str | None], None] | None = None  # the call's id once it is queued, then None


NO_HOOKS = Hooks()


class Caller:
    """Calls to the MCP pool from one request."""

    def __init__(self, shared: Services, person: str, own_headers_env: Callable[[str], dict], environ: dict | None,
                 traceparent: str = "", root: str = ""):
        """`root`: this server's URL as the client reached it (where a person connects an account)."""
        self.shared, self.person, self.own_headers_env = shared, person, own_headers_env
        self.environ, self.traceparent, self.root = environ, traceparent, root

    def _check_pool(self) -> None:
        """An MCP pool process is alive (seen within the last second by this web process, or now)."""
        if time.monotonic() - self.shared.mcp_pool_heard_at < 1.0:
            return
        if not pool_answers(self.shared.redis, gevent.sleep):
            raise RpcError(SERVER_UNAVAILABLE, NO_POOL)
        self.shared.mcp_pool_heard_at = time.monotonic()

    def call(self, server: str, method: str, params: dict, hooks: Hooks = NO_HOOKS, watch: bool = True,
             queue: Callable[[str], None] | None = None) -> dict:
        """The server's result, or RpcError (its own, or the gateway's:
        unavailable, timed out); ClientLeft if the client went away.
        `queue` puts the call (its JSON) on the pool's list, if not as it
        is (a tool call is admitted in the same round trip)."""
        on_progress, on_start = hooks.on_progress, hooks.on_start
        self._check_pool()
        entry = self.shared.registry.servers[server]
        wait = entry.timeout_seconds + entry.connect_timeout_seconds + REPLY_GRACE_SECONDS
        call_id = uuid.uuid4().hex
        relay = self.shared.relay
        subscription = relay.listen(call_id, self.shared.settings.subscribe_timeout_seconds)
        watch = DisconnectWatch(self.environ, subscription.close).start() if watch and self.environ else None
        try:
            call = Call(call_id, server, method, params, self.person,
                        keys.reply_channel(subscription.web_id, call_id),
                        time.time() + entry.timeout_seconds + entry.connect_timeout_seconds,
                        self.own_headers_env(server), self.traceparent)
            if queue is None:
                self.shared.redis.rpush(keys.MCP_CALLS, call.to_json())
            else:
                queue(call.to_json())
            if on_start is not None:
                on_start(call_id)
            return self._await(call_id, subscription, time.monotonic() + wait, on_progress)
        except RpcError as error:
            if error.code == NOT_CONNECTED:  # (the pool knows no URL of ours: the link is made whole here)
                raise RpcError(NOT_CONNECTED, not_connected(server, self.root),
                               {"server": server, "url": connect_url(self.root, server)}) from None
            raise
        finally:
            if watch is not None:
                watch.stop()
            relay.forget(subscription)
            if on_start is not None:
                on_start(None)  # (it runs no more)

    def _await(self, call_id: str, subscription, deadline: float, on_progress) -> dict:
        try:
            return self._replies(call_id, subscription, deadline, on_progress)
        except gevent.GreenletExit:  # its stream was closed: the client left
            self._cancel(call_id)
            raise

    def _replies(self, call_id: str, subscription, deadline: float, on_progress) -> dict:
        while True:
            try:
                data = subscription.messages.get(timeout=max(deadline - time.monotonic(), 0))
            except Empty:
                self._cancel(call_id)
                raise RpcError(CALL_TIMEOUT, "the MCP pool did not answer in time; the call was cancelled") from None
            if data is CLOSED:
                self._cancel(call_id)
                raise ClientLeft()
            reply = Reply.from_json(data)
            if reply.kind == "result":
                return reply.body
            if reply.kind == "error":
                raise RpcError(int(reply.body.get("code", SERVER_UNAVAILABLE)), str(reply.body.get("message", "")))
            if on_progress is not None:
                on_progress(reply.body)

    def _cancel(self, call_id: str) -> None:
        try:
            cancel(self.shared.redis, call_id)
        except RedisError:
            pass

    def gather(self, servers: tuple[str, ...], method: str) -> dict[str, list[dict]]:
        """One listing of each server, side by side; a server that fails is
        left out (and logged), the others are answered."""
        field_name = LISTINGS[method]

        def one(server: str) -> list[dict]:
            try:
                return self.call(server, method, {}, watch=False).get(field_name, [])
            except RpcError as error:
                log.warning('MCP gateway: listing %s of "%s" failed: %s', method, server, error.message)
                return []

        if len(servers) == 1:
            return {servers[0]: one(servers[0])}
        self._check_pool()
        greenlets = {server: gevent.spawn(one, server) for server in servers}
        gevent.joinall(list(greenlets.values()))
        return {server: greenlet.value or [] for server, greenlet in greenlets.items()}
