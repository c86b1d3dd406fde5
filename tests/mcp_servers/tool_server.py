"""A small MCP server for the tests, written with the SDK's server API and
served over streamable HTTP: `python -m tests.mcp_servers.tool_server PORT
NOTES_FILE`.

Its tools are deterministic, so a test can assert the exact final answer of
an agent loop: `say` returns its text, `chain` returns an `<invoke>` block
calling itself again (the echo model then "calls" it), `slow` sleeps (and
notes in NOTES_FILE whether it finished or was cancelled), `fail` fails,
`huge` returns a long result, `grow` adds a tool and says the list changed,
`steps` reports progress, `token` says whether the request carried the token the operator configured
(header X-Tools-Token, compared with $TEST_TOOLS_TOKEN, and a person's own
$TEST_OWN_TOKEN). A resource, a resource template and a prompt too."""
from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer

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


if __name__ == "__main__":
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
