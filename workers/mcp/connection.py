"""One MCP server's session, kept alive on the process's MCP loop.

A session belongs to an owner task: the SDK's `Client` is entered and left
in one task (anyio's rule). Callers on the loop wait for it to be ready,
then list or call through it concurrently. A server that went away (its
process died, its HTTP endpoint stopped answering) ends the owner task; the
next use connects again, so a restarted server is picked up without a
worker restart. The tool list is fetched once per session and again when
the server says it changed (a `tools/list_changed` notification on older
protocol versions; a `subscriptions/listen` stream on 2026-07-28 ones).
A remote server's gateway tool calls go beside the session, on its relay
(http_relay.py), in the era and with the session id the SDK agreed (the id
read from the SDK's own HTTP responses).
"""
from __future__ import annotations

import asyncio
import logging
import time

import httpx2
import mcp_types
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ListenNotSupportedError
from mcp.shared.inbound import x_mcp_header_map

from catalog.mcp import McpServer
from workers.mcp.http_relay import SESSION_HEADER, HttpRelay, Negotiated, reaches_directly

log = logging.getLogger(__name__)

CLIENT_INFO = mcp_types.Implementation(name="switchboard", version="1")
CLIENT_INFO_WIRE = CLIENT_INFO.model_dump(mode="json", by_alias=True, exclude_none=True)
# After a failed connection, uses fail at once (the last listing is still
# offered) for this long, doubling per failure up to the maximum: a server
# that is down costs jobs a connection attempt now and then, not each time.
RETRY_AFTER_FAILURE_SECONDS = 2.0
MAX_RETRY_AFTER_SECONDS = 60.0


class ServerUnavailable(Exception):
    """The server could not be reached; the message says why (no secrets)."""


def _reason(error: BaseException) -> str:
    """What went wrong, in a few words; never a header or a URL's secrets."""
    if isinstance(error, BaseExceptionGroup) and error.exceptions:
        return _reason(error.exceptions[0])
    if isinstance(error, TimeoutError):
        return "timed out"
    text = str(error).splitlines()[0] if str(error) else ""
    return f"{type(error).__name__}: {text}"[:200] if text else type(error).__name__


class ServerConnection:
    def __init__(self, server: McpServer, own_headers: dict[str, str] | None = None):
        """`own_headers`: a person's own (their token on an OAuth server), over the server's; never logged."""
        self.server, self._own_headers = server, own_headers or {}
        self._client: Client | None = None
        self._ready: asyncio.Future | None = None
        self._closing: asyncio.Event | None = None
        self._tools: list[mcp_types.Tool] | None = None
        self._stale = True
        self._failed_at = 0.0
        self._retry_after = 0.0
        self._failure = ""
        self._refreshing: asyncio.Task | None = None  # a listing made in the background (tools)
        self._session_id: str | None = None  # the session era's, as the server gave it to the SDK
        self._header_maps: dict[str, dict] = {}  # tool -> its arguments that travel as Mcp-Param-* headers
        # A remote server's tool calls go on the relay (http_relay.py) unless a proxy stands between.
        self.relay = HttpRelay(server.url, self.headers(), server.connect_timeout_seconds) \
            if server.transport == "http" and reaches_directly(server.url) else None

    # --- the session ------------------------------------------------------------
    def headers(self) -> dict[str, str]:
        return self.server.request_headers() | self._own_headers

    def _transport(self):
        if self.server.transport == "stdio":
            return StdioServerParameters(command=self.server.command, args=self.server.args,
                                         env=self.server.env or None, cwd=self.server.cwd)
        self._session_id = None
        http = httpx2.AsyncClient(headers=self.headers(),
                                  timeout=httpx2.Timeout(self.server.connect_timeout_seconds,
                                                         read=self.server.timeout_seconds + 5),
                                  event_hooks={"response": [self._saw_response]})
        return streamable_http_client(self.server.url, http_client=http)

    async def _saw_response(self, response: httpx2.Response) -> None:
        if session_id := response.headers.get(SESSION_HEADER):
            self._session_id = session_id

    def negotiated(self, client: Client) -> Negotiated:
        """What the session agreed with the server (the relay speaks it too)."""
        return Negotiated(client.protocol_version, self._session_id, CLIENT_INFO_WIRE, {})

    def header_map(self, tool: str) -> dict:
        return self._header_maps.get(tool, {})

    async def _on_message(self, message) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            self._stale = True

    async def _own(self, ready: asyncio.Future, closing: asyncio.Event) -> None:
        client = None
        try:
            async with Client(self._transport(), client_info=CLIENT_INFO, message_handler=self._on_message) as client:
                if ready.done():  # the caller gave up waiting (close() has set `closing`)
                    return
                self._client, self._stale, self._retry_after = client, True, 0.0
                ready.set_result(client)
                listener = asyncio.create_task(self._listen_for_changes(client))
                try:
                    await closing.wait()
                finally:
                    listener.cancel()
        except BaseException as error:  # noqa: BLE001 - the server went away, or never came
            if not ready.done():
                ready.set_exception(ServerUnavailable(_reason(error)))
            elif not closing.is_set():
                log.warning('MCP server "%s": connection lost (%s)', self.server.name, _reason(error))
        finally:
            if client is not None and self._client is client:  # never a newer session's
                self._client = None

    async def _listen_for_changes(self, client: Client) -> None:
        """On 2026-07-28 sessions a client must ask for change events; older
        ones send the notification unasked (see _on_message)."""
        try:
            async with client.listen(tools_list_changed=True) as events:
                async for _ in events:
                    self._stale = True
        except ListenNotSupportedError:
            pass
        except Exception as error:  # noqa: BLE001 - the session itself reports a dead server
            log.debug('MCP server "%s": no change events (%s)', self.server.name, _reason(error))

    async def client(self) -> Client:
        """The live session, connecting if there is none."""
        if self._client is not None:
            return self._client
        if self._ready is None or self._ready.done():  # no attempt under way
            if time.monotonic() - self._failed_at < self._retry_after:
                raise ServerUnavailable(self._failure)
            self._ready, self._closing = asyncio.get_running_loop().create_future(), asyncio.Event()
            asyncio.get_running_loop().create_task(self._own(self._ready, self._closing))
        attempt = self._ready
        try:
            async with asyncio.timeout(self.server.connect_timeout_seconds):
                return await asyncio.shield(attempt)
        except (ServerUnavailable, TimeoutError, asyncio.CancelledError) as error:
            if isinstance(error, asyncio.CancelledError) and not attempt.cancelled():
                raise  # the caller itself was cancelled (its job was)
            self._failed(attempt, error)
            raise ServerUnavailable(self._failure) from None

    def _failed(self, attempt: asyncio.Future, error: BaseException) -> None:
        """Once per failed attempt (however many callers waited on it)."""
        if attempt is self._ready:
            self._failed_at, self._failure = time.monotonic(), f"cannot connect: {_reason(error)}"
            self._retry_after = min(max(self._retry_after * 2, RETRY_AFTER_FAILURE_SECONDS), MAX_RETRY_AFTER_SECONDS)
            self.close()
            self._ready = None

    def close(self) -> None:
        if self._closing is not None:
            self._closing.set()
        if self._ready is not None and not self._ready.done():
            self._ready.cancel()

    def broken(self) -> None:
        """A call found the connection dead: the next use connects again."""
        self._client = None
        self.close()

    # --- what the server offers ---------------------------------------------------
    async def tools(self) -> list[mcp_types.Tool]:
        """The server's tools (those the registry lets it offer); the last
        listing if the server cannot be reached now, or [] if it never was.
        Once a connection failed, a listing no longer waits for the next
        attempt: it is made in the background, and the listing answered
        with what is known (a server that is down costs a listing of many
        servers nothing)."""
        if self._client is None and self._failed_at:
            if self._refreshing is None or self._refreshing.done():
                self._refreshing = asyncio.get_running_loop().create_task(self._fetched_tools())
            return self._tools or []
        return await self._fetched_tools()

    async def _fetched_tools(self) -> list[mcp_types.Tool]:
        try:
            client = await self.client()
            if self._stale or self._tools is None:
                self._stale = False
                self._tools = [t for t in await self._list_all(client) if self.server.offers(t.name)]
                self._header_maps = {t.name: x_mcp_header_map(t.input_schema) for t in self._tools}
        except ServerUnavailable as error:
            if self._tools is None:
                log.warning('MCP server "%s" offers no tools now: %s', self.server.name, error)
            return self._tools or []
        except Exception as error:  # noqa: BLE001 - a listing that failed leaves the last one
            self._stale = True
            log.warning('MCP server "%s": listing its tools failed (%s)', self.server.name, _reason(error))
            self.broken()
        return self._tools or []

    async def _list_all(self, client: Client) -> list[mcp_types.Tool]:
        tools, cursor = [], None
        async with asyncio.timeout(self.server.timeout_seconds):
            while True:
                page = await client.list_tools(cursor=cursor, cache_mode="refresh")
                tools += page.tools
                cursor = page.next_cursor
                if cursor is None:
                    return tools
