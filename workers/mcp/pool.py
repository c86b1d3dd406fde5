"""An MCP pool process: the MCP gateway's side that holds sessions with the
operator's MCP servers (`python -m workers.mcp.pool`, the Procfile's `mcp`).

Web processes push calls on one Redis list (protocol/gateway.py); every
pool process takes from it, so the pool scales by starting more. Everything
runs on the process's one asyncio loop (taking calls, publishing replies,
hearing cancels: no thread hops on a call's way), each call on its session
with the server: one per
server, shared by every caller (a stdio server is started once per
process), except a `per_person` stdio server (one per person) and a remote
server a person has their own credentials for (one per person). Its replies
go to the web process's relay; when nobody hears them any more (the client
left, its web process died) the call is cancelled, and the server is told
(by the SDK, or by the relay that carries remote servers' tool calls:
workers/mcp/http_relay.py).

A process takes at most MAX_CALLS calls at once: beyond that they wait on
the list (queued before refused), and a call whose deadline passed while it
waited is answered with an error, not run. Every second it publishes its
presence and its servers' health (state, last failure, calls) for the
console and for web processes, which refuse a call at once when no pool
process is alive.
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import socket
import time

from redis import asyncio as aioredis
from redis.exceptions import RedisError

from catalog.mcp import McpServer
from catalog.registry import load_registry
from identity import mcp_accounts
from identity.sealing import Sealer, office_secret
from protocol import keys
from protocol.connection import RedisTarget, async_redis_client, redis_client
from protocol.gateway import (
    CALL_TIMEOUT, NOT_CONNECTED, POOL_HEARD_SECONDS, SERVER_UNAVAILABLE, Call, Reply, not_connected,
)
from settings import load_settings
from workers.mcp.connection import ServerConnection
from workers.mcp.upstream_calls import answer

log = logging.getLogger("switchboard.mcp_pool")

MAX_CALLS = 256


class Health:
    """What the console shows of one server, as this process sees it."""

    def __init__(self):
        self.calls = self.failures = 0
        self.last_error, self.last_used, self.failing = "", 0.0, False

    def saw(self, reply: Reply) -> None:
        """A call's reply: the server failed it if it could not be reached or did not answer in time."""
        self.calls, self.last_used = self.calls + 1, time.time()
        self.failing = reply.kind == "error" and reply.body.get("code") in (SERVER_UNAVAILABLE, CALL_TIMEOUT)
        if self.failing:
            self.failures += 1
            self.last_error = reply.body.get("message", "")[:200]

    def view(self) -> dict:
        return {"calls": self.calls, "failures": self.failures, "last_error": self.last_error,
                "last_used": self.last_used, "failing": self.failing}


class Accounts:
    """People's tokens on the OAuth servers (identity/mcp_accounts.py), read sealed from Redis at each call (a
    token dropped on suspension is not used again) and refreshed here, off the loop, when they end soon."""

    def __init__(self, redis, sealer: Sealer):
        self.redis, self.sealer = redis, sealer

    async def token(self, server: McpServer, person: str) -> str:
        return await asyncio.to_thread(mcp_accounts.access_token, self.redis, self.sealer, server, person)


class McpPool:
    def __init__(self, redis: aioredis.Redis, servers: dict[str, McpServer], accounts: Accounts | None = None):
        self.redis, self.servers, self.accounts = redis, servers, accounts
        self.pool_id = f"{socket.gethostname()}:{os.getpid()}"
        self._connections: dict[tuple, ServerConnection] = {}
        self._tokens: dict[tuple, str] = {}  # (server, person) -> the token their session was made with
        self._known_tools: dict[str, dict] = {}  # an OAuth server's last listing (shown to people not connected)
        self._running: dict[str, asyncio.Task] = {}
        self._room = asyncio.Semaphore(MAX_CALLS)
        self.health = {name: Health() for name in servers}

    # --- sessions -------------------------------------------------------------------
    def connection(self, call: Call) -> ServerConnection:
        """This call's session with its server (made on first use)."""
        return self._session(call.server, *self.servers[call.server].session_of(call.person, call.own_headers_env))

    def _session(self, name: str, person: str, own: dict) -> ServerConnection:
        """The session with server `name` for `person` ("": shared) with their own credentials `own`."""
        key = (name, person, tuple(sorted(own.items())))
        if key not in self._connections:
            server = self.servers[name]
            if own:
                server = server.model_copy(update={"headers_env": server.headers_env | own})
            if server.per_person:
                server = server.model_copy(update={"env": server.env | {"SWITCHBOARD_PERSON": person}})
            self._connections[key] = ServerConnection(server)
        return self._connections[key]

    async def connection_of(self, call: Call) -> ServerConnection:
        """As `connection`; an OAuth server's session is the person's, with their token (a new session once
        it was refreshed: the old one is closed when its calls have had their time). NotConnected if they
        have no account there."""
        server = self.servers[call.server]
        if server.auth != "oauth":
            return self.connection(call)
        if self.accounts is None:
            raise mcp_accounts.NotConnected(server.name)
        token, whose = await self.accounts.token(server, call.person), (call.server, call.person)
        key = (call.server, call.person, ())
        if self._tokens.get(whose) != token:
            old = self._connections.pop(key, None)
            if old is not None:
                asyncio.get_running_loop().call_later(server.timeout_seconds + 5, old.close)
            self._connections[key] = ServerConnection(server, {"Authorization": f"Bearer {token}"})
            self._tokens[whose] = token
        return self._connections[key]

    async def warm(self) -> None:
        """Connect to every shared server and list its tools, side by side
        (each within its connect timeout): the first client's listing then
        waits for none of them, and a server that is down is known to be."""
        await asyncio.gather(*(self._session(name, "", {}).tools() for name, server in self.servers.items()
                               if not server.per_person and server.auth is None))

    # --- one call -------------------------------------------------------------------
    async def _run(self, call: Call) -> None:
        left = call.deadline - time.time()
        if call.server not in self.servers:
            reply = Reply.error(SERVER_UNAVAILABLE, f'no MCP server "{call.server}" in this pool\'s registry')
        elif left <= 0:
            reply = Reply.error(SERVER_UNAVAILABLE, "the call waited for a free MCP pool process past its deadline")
        else:
            try:
                connection = await self.connection_of(call)
            except mcp_accounts.NotConnected:
                await self._publish(call, self._unconnected(call))
                return
            except Exception as error:  # noqa: BLE001 - Redis or the sealed record: the call fails, the pool lives
                log.warning('MCP pool: no token for a call to "%s" (%s)', call.server, type(error).__name__)
                await self._publish(call, Reply.error(SERVER_UNAVAILABLE, f'the MCP server "{call.server}": your '
                                                      "account there could not be read now"))
                return
            timeout = min(connection.server.timeout_seconds, left)
            in_order = asyncio.Lock()  # (each notification's publish waits for the one before: FIFO)

            async def progress(value: float, total: float | None, message: str | None) -> None:
                body = {"progress": value} | ({"total": total} if total is not None else {}) \
                    | ({"message": message} if message else {})
                async with in_order:
                    if not await self._publish(call, Reply("progress", body)):
                        self.cancel(call.id)  # nobody hears it: the caller left

            reply = await answer(connection, call, timeout, progress)
            self.health[call.server].saw(reply)
            if call.method == "tools/list" and reply.kind == "result" and connection.server.auth == "oauth":
                self._known_tools[call.server] = reply.body
            # The SDK hands each progress notification to a task of its own, which may not have published
            # when the result comes: the result goes after them (a reply after the result is never heard).
            await asyncio.sleep(0)
            async with in_order:
                await self._publish(call, reply)
            return
        await self._publish(call, reply)

    def _unconnected(self, call: Call) -> Reply:
        """A person with no account on an OAuth server: its tools as last listed (so an agent sees them, and
        calling one says where to connect), anything else the error carrying where to connect (its caller
        makes the link whole)."""
        if call.method == "tools/list" and call.server in self._known_tools:
            return Reply("result", self._known_tools[call.server])
        return Reply("error", {"code": NOT_CONNECTED, "message": not_connected(call.server, ""),
                               "server": call.server})

    async def _publish(self, call: Call, reply: Reply) -> bool:
        """Whether anyone heard it."""
        try:
            heard = await self.redis.publish(call.reply_channel, reply.to_json())
        except RedisError as error:
            log.warning("MCP pool: a reply was lost (%s)", type(error).__name__)
            return False
        return bool(heard)

    def start(self, call: Call) -> None:
        task = asyncio.get_running_loop().create_task(self._run(call))
        self._running[call.id] = task
        task.add_done_callback(lambda _: self._finished(call.id))

    def _finished(self, call_id: str) -> None:
        self._running.pop(call_id, None)
        self._room.release()

    def cancel(self, call_id: str) -> None:
        task = self._running.get(call_id)
        if task is not None:
            task.cancel()

    # --- the process's loops --------------------------------------------------------
    async def take_forever(self) -> None:
        """Take calls from the list while there is room for them."""
        while True:
            await self._room.acquire()
            try:
                taken = await self.redis.blpop([keys.MCP_CALLS], timeout=1)
            except RedisError as error:
                self._room.release()
                log.warning("MCP pool: cannot take calls (%s); trying again", type(error).__name__)
                await asyncio.sleep(1)
                continue
            if taken is None:
                self._room.release()
                continue
            try:
                self.start(Call.from_json(taken[1]))
            except (ValueError, TypeError, KeyError) as error:
                self._room.release()
                log.error("MCP pool: dropped a malformed call (%s)", error)
                continue
            await asyncio.sleep(0)  # the call goes out to its server before the next BLPOP is sent

    async def listen_for_cancels(self) -> None:
        while True:
            pubsub = self.redis.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(keys.mcp_cancel_channel())
                while True:
                    message = await pubsub.get_message(timeout=1)
                    if message is not None:
                        self.cancel(message["data"].decode())
            except RedisError:
                await asyncio.sleep(1)
            finally:
                await pubsub.aclose()

    async def announce(self) -> None:
        view = {"pool": self.pool_id, "running": len(self._running), "at": time.time(),
                "servers": {name: health.view() for name, health in self.health.items()}}
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.set(keys.mcp_pool_key(self.pool_id), json.dumps(view), ex=int(POOL_HEARD_SECONDS))
                pipe.zadd(keys.MCP_POOLS, {self.pool_id: time.time()})
                pipe.zremrangebyscore(keys.MCP_POOLS, "-inf", time.time() - POOL_HEARD_SECONDS)
                await pipe.execute()
        except RedisError:
            pass

    async def announce_forever(self) -> None:
        while True:
            await asyncio.sleep(1)
            await self.announce()

    async def leave(self) -> None:
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.delete(keys.mcp_pool_key(self.pool_id))
                pipe.zrem(keys.MCP_POOLS, self.pool_id)
                await pipe.execute()
        except RedisError:
            pass

    async def serve(self) -> None:
        """Until cancelled (SIGTERM): its running calls end with the process."""
        await self.warm()
        await self.announce()
        beside = [asyncio.create_task(loop()) for loop in (self.listen_for_cancels, self.announce_forever)]
        log.info("MCP pool %s ready: servers %s", self.pool_id, ", ".join(self.servers) or "(none)")
        try:
            await self.take_forever()
        finally:
            for task in beside:
                task.cancel()
            await self.leave()


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx2").setLevel(logging.WARNING)  # (a line per request to a remote server otherwise)
    settings = load_settings()
    keys.configure(settings.redis_url, settings.record_seconds)
    registry = load_registry(settings.models_path)
    asyncio.run(_serve(settings, registry.servers))


async def _serve(settings, servers: dict[str, McpServer]) -> None:
    accounts = None
    if any(server.auth == "oauth" for server in servers.values()):
        secret = office_secret(settings.secret.get_secret_value() if settings.secret else None, settings.data_dir)
        accounts = Accounts(redis_client(RedisTarget.of(settings), "switchboard-mcp-accounts"), Sealer(secret))
    pool = McpPool(async_redis_client(RedisTarget.of(settings), "switchboard-mcp-pool", 16), servers, accounts)
    serving = asyncio.current_task()
    for stop in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(stop, serving.cancel)
    try:
        await pool.serve()
    except asyncio.CancelledError:
        pass


if __name__ == "__main__":
    main()
