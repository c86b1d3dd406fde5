"""A gateway tool call to a remote MCP server, sent as its JSON-RPC request
on a kept-alive HTTP/1.1 connection of this process's own, beside the
server's SDK session (workers/mcp/connection.py), which goes on doing
everything else: connecting, choosing the era, listings, change events.

Why beside the SDK: a gateway relays JSON, and the SDK's client costs
several times the server's own time on every request (its streams, tasks
and models, and httpx2 under them: docs/benchmarks-notes.md, section 15).
The relay sends what the SDK would send in the session's era, and reads
the answer: one JSON object, or an SSE stream of progress notifications
and then the answer.

- The session era: `MCP-Protocol-Version` and the session's
  `Mcp-Session-Id` headers (the id the server gave the SDK's handshake).
- The 2026-07-28 era: the `_meta` envelope (version, client info,
  capabilities) and the `Mcp-Method`, `Mcp-Name` and `Mcp-Param-*` headers,
  computed by the SDK's own functions (`mcp.shared.inbound`).
- Cancellation: the connection is closed (the 2026-07-28 era's signal),
  and in the session era `notifications/cancelled` is posted too.

tests/unit/test_mcp_http_relay.py checks that the request is the SDK's.
Where a proxy applies to the server's URL (HTTP(S)_PROXY, NO_PROXY) the
relay steps aside and the SDK sends every call; so does a call the server
redirects (NotRelayed, before the tool ran).
"""
from __future__ import annotations

import asyncio
import itertools
import json
import logging
import urllib.request
from dataclasses import dataclass
from typing import Awaitable, Callable
from urllib.parse import urlsplit

import h11
import httpx2
import mcp_types
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import (MCP_METHOD_HEADER, MCP_NAME_HEADER, MCP_PROTOCOL_VERSION_HEADER, encode_header_value,
                                mcp_param_headers)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

log = logging.getLogger(__name__)

SESSION_HEADER = "mcp-session-id"
MAX_IDLE = 32  # idle connections kept per server
_BLOCK = 65536
Progress = Callable[[float, float | None, str | None], Awaitable[None]]


class NotRelayed(Exception):
    """The relay did not send this call (or the server redirected it before
    running it): the SDK session sends it."""


class RelayFailed(Exception):
    """The server answered over HTTP but not with a JSON-RPC answer; the
    message says how (a status, never a header)."""


def reaches_directly(url: str) -> bool:
    """Whether the relay may call this URL: no proxy of the environment applies."""
    parts = urlsplit(url)
    proxies = urllib.request.getproxies()
    if parts.scheme not in proxies and "all" not in proxies:
        return True
    return bool(urllib.request.proxy_bypass(parts.hostname or ""))


@dataclass(frozen=True)
class Negotiated:
    """What the SDK's session agreed with the server."""

    version: str
    session_id: str | None
    client_info: dict
    capabilities: dict

    @property
    def modern(self) -> bool:
        return self.version in MODERN_PROTOCOL_VERSIONS


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader, self.writer = reader, writer
        self.state = h11.Connection(h11.CLIENT)
        self.received = False  # any byte of an answer on this request

    @property
    def stale(self) -> bool:
        return self.reader.at_eof() or self.writer.is_closing()

    async def next_event(self):
        while (event := self.state.next_event()) is h11.NEED_DATA:
            data = await self.reader.read(_BLOCK)
            self.received = self.received or bool(data)
            self.state.receive_data(data)
        return event

    async def body(self) -> bytes:
        parts = []
        while not isinstance(event := await self.next_event(), h11.EndOfMessage):
            parts.append(bytes(event.data))
        return b"".join(parts)

    def reusable(self) -> bool:
        if self.state.our_state is not h11.DONE or self.state.their_state is not h11.DONE:
            return False
        self.state.start_next_cycle()
        return True

    def close(self) -> None:
        self.writer.close()


class _Body(httpx2.AsyncByteStream):
    """A response body as httpx2's SSE reader takes it."""

    def __init__(self, connection: _Connection):
        self.connection = connection

    async def __aiter__(self):
        while not isinstance(event := await self.connection.next_event(), h11.EndOfMessage):
            yield bytes(event.data)


class HttpRelay:
    """Calls to one remote server at `url` with `headers` (the operator's,
    and a person's own, as the SDK's session sends them)."""

    def __init__(self, url: str, headers: dict[str, str], connect_timeout: float):
        parts = urlsplit(url)
        self._url = url
        self._tls = httpx2.create_ssl_context() if parts.scheme == "https" else None  # (httpx2's CAs, as the SDK's)
        self._host = parts.hostname or ""
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._headers = [("host", parts.netloc.rpartition("@")[2]), ("user-agent", "switchboard"),
                         ("accept", "application/json, text/event-stream"), ("content-type", "application/json"),
                         *((name.lower(), value) for name, value in headers.items())]
        self._connect_timeout = connect_timeout
        self._idle: list[_Connection] = []
        self._ids = itertools.count(1)

    async def call_tool(self, session: Negotiated, params: dict, header_map: dict, progress: Progress) -> dict:
        """The server's result; MCPError for its JSON-RPC error (and, as the
        SDK's session says it, CONNECTION_CLOSED when the server dropped the
        connection before answering); RelayFailed when it gave no answer;
        OSError or h11's errors when the request could not be sent."""
        request_id = f"switchboard-{next(self._ids)}"
        headers, body = self.request(session, request_id, "tools/call", params, header_map)
        connection = await self._send(headers, body)
        try:
            answer = await self._answer(connection, session, request_id, progress)
        except asyncio.CancelledError:  # (the caller left, or its time is up)
            connection.close()  # the 2026-07-28 era's cancellation
            if not session.modern:
                self._tell_cancelled(session, request_id)
            raise
        except (OSError, h11.ProtocolError) as error:
            connection.close()
            raise MCPError(mcp_types.CONNECTION_CLOSED, "the connection closed during the call") from error
        except BaseException:
            connection.close()
            raise
        self._give_back(connection)
        return answer

    # --- the request ----------------------------------------------------------------
    def request(self, session: Negotiated, request_id: str, method: str, params: dict,
                header_map: dict) -> tuple[list[tuple[str, str]], bytes]:
        """Its headers and body, as the SDK's session would send them."""
        meta = {"progressToken": request_id}
        headers = [*self._headers, (MCP_PROTOCOL_VERSION_HEADER, session.version)]
        if session.modern:
            meta = {mcp_types.PROTOCOL_VERSION_META_KEY: session.version,
                    mcp_types.CLIENT_INFO_META_KEY: session.client_info,
                    mcp_types.CLIENT_CAPABILITIES_META_KEY: session.capabilities} | meta
            headers += [(MCP_METHOD_HEADER, method), (MCP_NAME_HEADER, encode_header_value(params["name"])),
                        *mcp_param_headers(header_map, params.get("arguments") or {}).items()]
        if session.session_id:
            headers.append((SESSION_HEADER, session.session_id))
        body = _json({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params | {"_meta": meta}})
        return headers + [("content-length", str(len(body)))], body

    async def _send(self, headers: list, body: bytes) -> _Connection:
        """The request sent, on an idle connection or a new one; a kept-alive
        connection the server had closed meanwhile is replaced once (the
        request never reached it)."""
        while self._idle:
            connection = self._idle.pop()
            if connection.stale:
                connection.close()
                continue
            try:
                await self._write(connection, headers, body)
                return connection
            except (OSError, h11.ProtocolError):
                connection.close()
        connection = await self._connect()
        await self._write(connection, headers, body)
        return connection

    async def _connect(self) -> _Connection:
        async with asyncio.timeout(self._connect_timeout):
            reader, writer = await asyncio.open_connection(self._host, self._port, ssl=self._tls,
                                                           limit=_BLOCK)
        return _Connection(reader, writer)

    async def _write(self, connection: _Connection, headers: list, body: bytes) -> None:
        state = connection.state
        connection.writer.write(state.send(h11.Request(method="POST", target=self._target, headers=headers))
                                + state.send(h11.Data(data=body)) + state.send(h11.EndOfMessage()))
        await connection.writer.drain()

    def _give_back(self, connection: _Connection) -> None:
        if connection.reusable() and len(self._idle) < MAX_IDLE:
            self._idle.append(connection)
        else:
            connection.close()

    # --- the answer -----------------------------------------------------------------
    async def _answer(self, connection: _Connection, session: Negotiated, request_id: str,
                      progress: Progress) -> dict:
        response = await connection.next_event()
        if isinstance(response, h11.InformationalResponse):
            response = await connection.next_event()
        kind = _header(response, b"content-type").split(";")[0].strip().lower()
        if 300 <= response.status_code < 400:
            raise NotRelayed(f"the server redirected the call (HTTP {response.status_code})")
        if kind == "text/event-stream" and response.status_code == 200:
            return await self._streamed(connection, response, session, request_id, progress)
        body = await connection.body()
        if response.status_code == 404 and session.session_id:
            raise MCPError(mcp_types.CONNECTION_CLOSED, "the MCP server ended its session")
        if kind == "application/json" and body:
            return _result_of(_message(body), request_id)
        raise RelayFailed(f"HTTP {response.status_code} without a JSON-RPC answer")

    async def _streamed(self, connection: _Connection, response, session: Negotiated, request_id: str,
                        progress: Progress) -> dict:
        """Progress notifications as they come, then the answer."""
        stream = httpx2.Response(response.status_code, headers=response.headers, stream=_Body(connection),
                                 request=httpx2.Request("POST", self._url))
        async for event in httpx2.EventSource(stream):
            if not event.data:
                continue
            message = _message(event.data.encode())
            if message.get("id") == request_id and ("result" in message or "error" in message):
                return _result_of(message, request_id)
            if message.get("method") == "notifications/progress":
                await _progressed(message.get("params"), request_id, progress)
            elif "method" in message and "id" in message:  # the server asks the client something
                self._refuse(session, message)
        raise RelayFailed("the server's stream ended without an answer")

    # --- messages of our own, on a connection of their own -------------------------------
    def _tell_cancelled(self, session: Negotiated, request_id: str) -> None:
        self._post_aside(session, {"jsonrpc": "2.0", "method": "notifications/cancelled",
                                   "params": {"requestId": request_id, "reason": "the gateway's caller left"}})

    def _refuse(self, session: Negotiated, message: dict) -> None:
        """A server's request to us: a ping is answered; sampling,
        elicitation and roots were never offered (no capabilities)."""
        answer = {"result": {}} if message["method"] == "ping" else \
            {"error": {"code": mcp_types.METHOD_NOT_FOUND, "message": f'"{message["method"]}" is not offered'}}
        self._post_aside(session, {"jsonrpc": "2.0", "id": message["id"]} | answer)

    def _post_aside(self, session: Negotiated, message: dict) -> None:
        asyncio.get_running_loop().create_task(self._post(session, message))

    async def _post(self, session: Negotiated, message: dict) -> None:
        body = _json(message)
        headers = [*self._headers, (MCP_PROTOCOL_VERSION_HEADER, session.version),
                   *([(SESSION_HEADER, session.session_id)] if session.session_id else []),
                   ("content-length", str(len(body)))]
        try:
            async with asyncio.timeout(self._connect_timeout):
                connection = await self._connect()
                try:
                    await self._write(connection, headers, body)
                    await connection.next_event()
                finally:
                    connection.close()
        except (OSError, TimeoutError, h11.ProtocolError) as error:
            log.debug("MCP relay: a message to the server was lost (%s)", type(error).__name__)


def _json(value: dict) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def _header(response, name: bytes) -> str:
    return next((value.decode("latin-1") for key, value in response.headers if key == name), "")


def _message(data: bytes) -> dict:
    try:
        message = json.loads(data)
    except ValueError:
        raise RelayFailed("the server's answer is not JSON") from None
    if not isinstance(message, dict):
        raise RelayFailed("the server's answer is not a JSON-RPC message")
    return message


def _result_of(message: dict, request_id: str) -> dict:
    if message.get("id") != request_id:
        raise RelayFailed("the server answered another request")
    error = message.get("error")
    if isinstance(error, dict):
        raise MCPError(int(error.get("code", mcp_types.INTERNAL_ERROR)), str(error.get("message", "")))
    result = message.get("result")
    if not isinstance(result, dict):
        raise RelayFailed("the server's answer has no result")
    if result.get("resultType") == "input_required":
        raise MCPError(mcp_types.INTERNAL_ERROR, "the MCP server asked for more input (input_required), which the "
                                                 "gateway does not pass on")
    return result


async def _progressed(params, request_id: str, progress: Progress) -> None:
    if not isinstance(params, dict) or params.get("progressToken") != request_id:
        return
    value, total, text = params.get("progress"), params.get("total"), params.get("message")
    if isinstance(value, (int, float)):
        await progress(value, total if isinstance(total, (int, float)) else None,
                       text if isinstance(text, str) else None)
