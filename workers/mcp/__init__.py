"""Server-side tools over the Model Context Protocol: the operator's MCP
servers (catalog/mcp.py), reached with the official `mcp` SDK from the worker
that runs a job (see workers/server_tools.py for the loop that calls them)."""
