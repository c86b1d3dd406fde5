"""A small MCP server for the tests, written with the SDK's server API and
served over streamable HTTP: `python -m tests.mcp_servers.tool_server PORT
NOTES_FILE`.

Its tools are deterministic, so a test can assert the exact final answer of
an agent loop: `say` returns its text, `chain` returns an `<invoke>` block
calling itself again (the echo model then "calls" it), `slow` sleeps (and
notes in NOTES_FILE whether it finished or was cancelled), `fail` fails, `regional` takes an argument the 2026-07-28 era sends as a header too,
`huge` returns a long result, `grow` adds a tool and says the list changed,
`steps` reports progress, `token` says whether the request carried the token the operator configured
(header X-Tools-Token, compared with $TEST_TOOLS_TOKEN, and a person's own
$TEST_OWN_TOKEN). A resource, a resource template and a prompt too.

`/mcp` speaks both spec eras; `/session-era/mcp` is the same server as a
2025 one answers: a request of the 2026-07-28 era (a `server/discover`
probe) is refused as a request without a session, so clients fall back to
the `initialize` handshake and its `Mcp-Session-Id`."""
from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Annotated

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import Field

server = MCPServer("switchboard-test-tools")
NOTES = Path(sys.argv[2]) if len(sys.argv) > 2 else None


def note(line: str) -> None:
    if NOTES is not None:
        with NOTES.open("a") as file:
            file.write(line + "\n")


@server.tool()
def say(text: str) -> str:
    """Return the text."""
    return text


@server.tool()
def chain(n: int) -> str:
    """Return a call of chain(n - 1) until n is 0."""
    if n <= 0:
        return "chain finished"
    return f'<invoke name="chain">\n<parameter name="n">{n - 1}</parameter>\n</invoke>'


@server.tool()
async def slow(seconds: float) -> str:
    """Sleep, then say so."""
    note(f"slow {seconds} started")
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        note(f"slow {seconds} cancelled")
        raise
    note(f"slow {seconds} finished")
    return f"slept {seconds} s"


@server.tool()
def regional(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]) -> str:
    """Name the region, which 2026-07-28 clients also send as the Mcp-Param-Region header."""
    return f"region {region}"


@server.tool()
def fail(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(f"failed on purpose: {reason}")


@server.tool()
def huge(chars: int) -> str:
    """Return `chars` characters."""
    return ("0123456789" * (chars // 10 + 1))[:chars]


@server.tool()
def token(ctx: Context) -> str:
    """Whether this request carried the expected X-Tools-Token header."""
    sent = (ctx.headers or {}).get("x-tools-token")
    if sent and sent == os.environ.get("TEST_TOOLS_TOKEN"):
        return "token accepted"
    return "own token accepted" if sent and sent == os.environ.get("TEST_OWN_TOKEN") else "no token"


@server.tool()
async def grow(name: str, ctx: Context) -> str:
    """Add a tool called `name` (it answers "<name> grown")."""
    def grown() -> str:
        return f"{name} grown"

    server.add_tool(grown, name=name, description="A tool added at run time.")
    await ctx.notify_tools_changed()
    return f"added {name}"


@server.tool()
async def steps(count: int, ctx: Context) -> str:
    """Report progress `count` times, then say so."""
    for step in range(1, count + 1):
        await ctx.report_progress(step, count, f"step {step}")
    return f"{count} steps"


@server.resource("notes://today")
def today() -> str:
    """Today's note."""
    return "remember the milk"


@server.resource("notes://day/{day}")
def a_day(day: str) -> str:
    """A day's note."""
    return f"note of {day}"


@server.prompt()
def review(topic: str) -> str:
    """Ask for a review of a topic."""
    return f"Please review {topic}."


SESSION_ERA_PREFIX = "/session-era"


def session_era_beside(app):
    """`app`, with its endpoint under SESSION_ERA_PREFIX answering as a server
    of the 2025 spec does."""
    async def serve(scope, receive, send):
        if scope["type"] != "http" or not scope["path"].startswith(SESSION_ERA_PREFIX + "/"):
            return await app(scope, receive, send)
        version = dict(scope["headers"]).get(b"mcp-protocol-version", b"").decode("latin-1")
        if version and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            body = json.dumps({"jsonrpc": "2.0", "id": "server-error", "error": {
                "code": -32600, "message": "Bad Request: Missing session ID"}}).encode()
            await send({"type": "http.response.start", "status": 400,
                        "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]})
            return await send({"type": "http.response.body", "body": body})
        path = scope["path"].removeprefix(SESSION_ERA_PREFIX)
        await app(scope | {"path": path, "raw_path": path.encode()}, receive, send)
    return serve


if __name__ == "__main__":
    uvicorn.run(session_era_beside(server.streamable_http_app(host="127.0.0.1")), host="127.0.0.1",
                port=int(sys.argv[1]), log_level="warning")
