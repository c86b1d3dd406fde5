"""The worker's side of server tools, for code that is not async: which
tools a job may be offered, and running calls (concurrently, each with its
server's timeout and result-size limit).

Nothing a call can do reaches past this module as an exception, except the
job's own cancellation: a failing tool, a timeout, a server that is down,
all become a result with an error status, worded for the model to read.
"""
from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass
from typing import Literal

import mcp_types
from mcp.shared.exceptions import MCPError

from catalog.mcp import McpServer
from protocol.contract import ToolSpec
from workers.cancel import Cancel
from workers.mcp.connection import ServerConnection, ServerUnavailable
from workers.mcp.loop import BackgroundLoop

log = logging.getLogger(__name__)

Status = Literal["ok", "error", "timeout"]


@dataclass(frozen=True)
class ServerTool:
    server: str
    spec: ToolSpec


@dataclass(frozen=True)
class ToolResult:
    text: str
    status: Status
    seconds: float
    result_chars: int = 0
    truncated: bool = False
    refused: bool = False  # not run: over the person's rates (counted as the gateway counts a refused call)


def _content_text(item) -> str:
    if isinstance(item, mcp_types.TextContent):
        return item.text
    if isinstance(item, mcp_types.EmbeddedResource) and hasattr(item.resource, "text"):
        return item.resource.text
    if isinstance(item, mcp_types.ResourceLink):
        return f"[resource: {item.uri}]"
    return f"[{getattr(item, 'type', 'content')} omitted: {getattr(item, 'mime_type', '') or 'binary'}]"


def result_text(result: mcp_types.CallToolResult) -> str:
    """A result as the model reads it: its text parts (other parts named),
    or its structured content as JSON when it has no parts."""
    if result.content:
        return "\n".join(_content_text(item) for item in result.content)
    if result.structured_content is not None:
        return json.dumps(result.structured_content, ensure_ascii=False)
    return ""


def limited(text: str, limit: int) -> tuple[str, bool]:
    if len(text) <= limit:
        return text, False
    return f"{text[:limit]}\n[result truncated: the first {limit} of {len(text)} characters]", True


class Toolbox:
    def __init__(self, servers: dict[str, McpServer], loop: BackgroundLoop | None = None):
        self._servers = servers
        self._loop = loop or BackgroundLoop()
        self._connections = {name: ServerConnection(server) for name, server in servers.items()}
        self._own: dict[tuple, ServerConnection] = {}  # (server, its person's credentials): their session

    def _connection(self, name: str, own: dict[str, str]) -> ServerConnection:
        """The server's shared session, or, for a remote server the person has credentials of their own
        for, theirs (as the MCP pool holds them): their calls never carry the operator's credential."""
        server = self._servers[name]
        if not own or server.transport != "http":
            return self._connections[name]
        key = (name, tuple(sorted(own.items())))
        if key not in self._own:
            self._own[key] = ServerConnection(server.model_copy(update={"headers_env": server.headers_env | own}))
        return self._own[key]

    def offered(self, server_names: list[str], cancel: Cancel | None = None) -> list[ServerTool]:
        """The tools of these servers, in order; a name offered by two
        servers goes to the one listed first."""
        names = [name for name in server_names if name in self._connections]
        if not names:
            return []
        listings = self._loop.run(self._list(names), cancel)
        tools: dict[str, ServerTool] = {}
        for server, listing in zip(names, listings):
            for tool in listing:
                tools.setdefault(tool.name, ServerTool(server, ToolSpec(
                    name=tool.name, description=tool.description or "", parameters=tool.input_schema or {})))
        return list(tools.values())

    async def _list(self, names: list[str]) -> list[list[mcp_types.Tool]]:
        return list(await asyncio.gather(*(self._connections[name].tools() for name in names)))

    def call_all(self, calls: list[tuple[ServerTool, dict]], cancel: Cancel | None = None,
                 own: dict[str, dict[str, str]] | None = None) -> list[ToolResult]:
        """Run the calls concurrently (with the person's `own` credentials per
        server, where they have some); results in the calls' order. Raises
        concurrent.futures.CancelledError if the job is cancelled (every
        running call is cancelled on its server)."""
        return self._loop.run(self._call_all(calls, own or {}), cancel)

    async def _call_all(self, calls: list[tuple[ServerTool, dict]], own: dict) -> list[ToolResult]:
        return list(await asyncio.gather(*(self._call(tool, arguments, own.get(tool.server, {}))
                                           for tool, arguments in calls)))

    async def _call(self, tool: ServerTool, arguments: dict, own: dict[str, str]) -> ToolResult:
        server, name = self._servers[tool.server], tool.spec.name
        started = time.monotonic()

        def ended(text: str, status: Status) -> ToolResult:
            shown, truncated = limited(text, server.max_result_chars)
            return ToolResult(shown, status, time.monotonic() - started, len(text), truncated)

        connection = self._connection(tool.server, own)
        try:
            client = await connection.client()
            async with asyncio.timeout(server.timeout_seconds):
                result = await client.call_tool(name, arguments)
        except ServerUnavailable as error:
            return ended(f'Error: the MCP server "{tool.server}" is unavailable ({error}).', "error")
        except TimeoutError:
            return ended(f'Error: the tool "{name}" did not answer within {server.timeout_seconds:g} s and was '
                         "cancelled.", "timeout")
        except MCPError as error:
            if error.code == mcp_types.CONNECTION_CLOSED:
                connection.broken()
                return ended(f'Error: the MCP server "{tool.server}" closed the connection during the call.',
                             "error")
            return ended(f"Error: {error.message}", "error")
        except Exception as error:  # noqa: BLE001 - whatever the SDK or transport raised: the model is told
            log.warning('MCP call %s.%s failed: %s', tool.server, name, type(error).__name__)
            connection.broken()
            return ended(f'Error: calling "{name}" failed ({type(error).__name__}).', "error")
        return ended(result_text(result), "error" if result.is_error else "ok")
