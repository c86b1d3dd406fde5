"""A stdio MCP server for the per-person test: `whoami` says whose process
it is ($SWITCHBOARD_PERSON, set by the MCP pool for a `per_person` server)
and its pid. `python -m tests.mcp_servers.person_server`."""
from __future__ import annotations

import os

from mcp.server.mcpserver import MCPServer

server = MCPServer("switchboard-test-person")


@server.tool()
def whoami() -> str:
    """Whose process this is, and its pid."""
    return f"{os.environ.get('SWITCHBOARD_PERSON', '?')} {os.getpid()}"


if __name__ == "__main__":
    server.run("stdio")
