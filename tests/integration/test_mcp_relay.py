"""The MCP pool's relay (workers/mcp/http_relay.py) sends what the SDK's
session sends, and gets what the SDK gets, from the tests' real tool server
in both spec eras: `/mcp` (the SDK negotiates 2026-07-28) and
`/session-era/mcp` (a 2025 server: the handshake and Mcp-Session-Id)."""
from __future__ import annotations

import asyncio
import json

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from catalog.mcp import McpServer
from workers.mcp.connection import CLIENT_INFO, ServerConnection
from workers.mcp.upstream_calls import dumped

PATHS = {"both-eras": "/mcp", "session-era": "/session-era/mcp"}
ARGUMENTS = {"text": "héllo\nthere"}  # (a value no header could carry as it is)
# What differs between any two requests (or clients) and says nothing of the call.
INCIDENTAL = {"host", "user-agent", "accept-encoding", "connection", "content-length"}


def normalised(headers: dict, body: dict) -> tuple[dict, dict]:
    body = json.loads(json.dumps(body))
    body.pop("id")
    body["params"]["_meta"].pop("progressToken")
    return {k.lower(): v for k, v in headers.items() if k.lower() not in INCIDENTAL}, body


async def ignored(*_progress) -> None:
    pass


async def sdk_call(url: str, mode: str, tool: str, arguments: dict) -> tuple[tuple[dict, dict], dict]:
    """The request the SDK's own session (as the pool opens it) sends for the call, and its result."""
    sent = []

    async def note(request: httpx2.Request) -> None:
        body = json.loads(await request.aread() or b"{}")
        if body.get("method") == "tools/call":
            sent.append((dict(request.headers), body))
    http = httpx2.AsyncClient(event_hooks={"request": [note]})
    async with Client(streamable_http_client(url, http_client=http), mode=mode, client_info=CLIENT_INFO) as sdk:
        await sdk.list_tools()
        result = dumped(await sdk.call_tool(tool, arguments, progress_callback=ignored))  # (as the pool asks)
    return sent[0], result


async def sdk_and_relay(url: str, tool: str, arguments: dict):
    connection = ServerConnection(McpServer(name="tools", url=url))
    client = await connection.client()
    await connection.tools()
    session = connection.negotiated(client)
    by_sdk = await sdk_call(url, session.version if session.modern else "legacy", tool, arguments)
    params = {"name": tool, "arguments": arguments}
    headers, body = connection.relay.request(session, "x", "tools/call", params, connection.header_map(tool))
    by_relay = await connection.relay.call_tool(session, params, connection.header_map(tool), None)
    connection.close()
    return by_sdk, ((dict(headers), json.loads(body)), by_relay), session


@pytest.mark.parametrize("tool, arguments", [("say", ARGUMENTS), ("regional", {"region": "eu-west"})],
                         ids=["say", "an-argument-in-a-header"])
@pytest.mark.parametrize("path", PATHS)
def test_the_relay_sends_what_the_sdk_sends_and_gets_what_it_gets(tool_server, path, tool, arguments):
    (sdk, by_sdk), (relay, by_relay), session = asyncio.run(
        sdk_and_relay(f"http://127.0.0.1:{tool_server[0]}{PATHS[path]}", tool, arguments))
    sdk_headers, sdk_body = normalised(*sdk)
    relay_headers, relay_body = normalised(*relay)
    sdk_headers.pop("mcp-session-id", None), relay_headers.pop("mcp-session-id", None)  # (each session its own)
    assert relay_headers == sdk_headers and relay_body == sdk_body
    assert session.modern == (path == "both-eras") and (session.session_id is None) == session.modern
    if path == "both-eras" and tool == "regional":
        assert relay_headers["mcp-param-region"] == "eu-west"  # (the server checks it against the body)
    assert by_relay["content"] == by_sdk["content"] and not by_relay.get("isError")
    assert by_relay["structuredContent"] == by_sdk["structuredContent"]
