"""One gateway call made on an upstream MCP server's session: the MCP
method a client asked for (protocol/gateway.py), its answer as the JSON the
client gets, or a JSON-RPC error; never an exception past `answer`.

Listings are answered whole (every page fetched here), so the web process
can filter and name them once; a tools listing comes from the connection's
own cache (refreshed when the server says its tools changed; while the
server is down, its last listing, so that a call says why it fails).
"""
from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable

import mcp_types
from mcp import Client
from mcp.shared.exceptions import MCPError

from mcp_types import INVALID_PARAMS

from dialects.mcp import LISTINGS
from protocol.gateway import CALL_TIMEOUT, SERVER_UNAVAILABLE, Call, Reply
from workers.mcp.connection import ServerConnection, ServerUnavailable
from workers.mcp.http_relay import NotRelayed, RelayFailed

log = logging.getLogger(__name__)

Progress = Callable[[float, float | None, str | None], Awaitable[None]]
# Pages of one listing followed at most (a server whose cursors never end is cut off here).
MOST_PAGES = 100


def dumped(result) -> dict:
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)


async def _all_pages(fetch, method: str) -> dict:
    """Every page of a listing, as one (the field the wire names it by)."""
    field, items, cursor = LISTINGS[method], [], None
    for _ in range(MOST_PAGES):
        page = await fetch(cursor)
        items += dumped(page).get(field, [])
        cursor = page.next_cursor
        if cursor is None:
            break
    return {field: items}


def _arguments(params: dict) -> dict | None:
    arguments = params.get("arguments")
    return arguments if isinstance(arguments, dict) else None


async def _call_tool(connection: ServerConnection, client: Client, params: dict, progress: Progress) -> dict:
    """On the relay where it reaches the server, else on the SDK's session."""
    name = params["name"]
    if name not in {tool.name for tool in await connection.tools()}:  # (or one the registry withholds)
        raise MCPError(INVALID_PARAMS, f'Unknown tool: "{name}"')
    arguments = _arguments(params)
    if connection.relay is not None:
        sent = {"name": name} | ({"arguments": arguments} if arguments is not None else {})
        try:
            return await connection.relay.call_tool(connection.negotiated(client), sent, connection.header_map(name),
                                                    progress)
        except NotRelayed as why:
            log.debug('MCP gateway: "%s" on the SDK session: %s', connection.server.name, why)
    return dumped(await client.call_tool(name, arguments, progress_callback=progress))


async def perform(connection: ServerConnection, client: Client, method: str, params: dict,
                  progress: Progress) -> dict:
    """The server's answer to one method (raises what the SDK raises)."""
    if method == "tools/call":
        return await _call_tool(connection, client, params, progress)
    if method == "resources/list":
        return await _all_pages(lambda c: client.list_resources(cursor=c, cache_mode="refresh"), method)
    if method == "resources/templates/list":
        return await _all_pages(lambda c: client.list_resource_templates(cursor=c, cache_mode="refresh"), method)
    if method == "resources/read":
        return dumped(await client.read_resource(params["uri"], cache_mode="bypass"))
    if method == "prompts/list":
        return await _all_pages(lambda c: client.list_prompts(cursor=c, cache_mode="refresh"), method)
    if method == "prompts/get":
        return dumped(await client.get_prompt(params["name"], _arguments(params)))
    if method == "completion/complete":
        return dumped(await client.complete(mcp_types.CompleteRequestParams.model_validate(params)))
    raise ValueError(f"not an upstream method: {method}")


async def answer(connection: ServerConnection, call: Call, timeout: float, progress: Progress) -> Reply:
    """The call's reply; cancellation (the caller left) propagates."""
    server = connection.server.name
    try:
        async with asyncio.timeout(timeout):
            if call.method == "tools/list":  # (the last listing while the server is down: its calls say why)
                return Reply("result", {"tools": [dumped(tool) for tool in await connection.tools()]})
            client = await connection.client()
            return Reply("result", await perform(connection, client, call.method, call.params, progress))
    except ServerUnavailable as error:
        return Reply.error(SERVER_UNAVAILABLE, f'the MCP server "{server}" is unavailable ({error})')
    except TimeoutError:
        return Reply.error(CALL_TIMEOUT, f'the MCP server "{server}" did not answer {call.method} within '
                                         f"{timeout:g} s; the request was cancelled")
    except RelayFailed as error:
        return Reply.error(SERVER_UNAVAILABLE, f'the MCP server "{server}" gave no answer to {call.method} ({error})')
    except MCPError as error:
        if error.code == mcp_types.CONNECTION_CLOSED:
            connection.broken()
            return Reply.error(SERVER_UNAVAILABLE, f'the MCP server "{server}" closed the connection during the call')
        return Reply.error(error.code, error.message)
    except Exception as error:  # noqa: BLE001 - whatever the SDK or transport raised: the client is told
        log.warning("MCP gateway call %s %s failed: %s", server, call.method, type(error).__name__)
        connection.broken()
        return Reply.error(SERVER_UNAVAILABLE, f'calling the MCP server "{server}" failed ({type(error).__name__})')
