"""MCP servers the operator offers to models: `[mcp_servers.NAME]` tables in
the registry, never anything a request says.

    [mcp_servers.time]                     # a stdio server: a command the worker starts
    command = "mcp-server-time"
    args = ["--local-timezone", "Europe/Paris"]
    env = { TZ = "Europe/Paris" }          # added to a minimal environment (PATH, HOME, LANG)

    [mcp_servers.tickets]                  # a remote server over streamable HTTP
    url = "https://tickets.example/mcp"
    headers_env = { Authorization = "TICKETS_MCP_AUTH" }   # header -> variable holding its value
    timeout_seconds = 30                   # per call (default 30)
    max_result_chars = 16000               # a longer result is cut, saying so

A model gets servers' tools with `mcp_servers = ["time", "tickets"]` in its
own table; a key may be limited to some servers in the keys file. Secrets
sit in environment variables and are read when a worker connects: the
registry, logs and errors hold only the variables' names.
"""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from catalog.secrets import secret_from_env


class McpServer(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)  # not secret: shown nowhere anyway
    headers_env: dict[str, str] = Field(default_factory=dict)  # header -> environment variable
    timeout_seconds: float = Field(default=30.0, gt=0, le=3600)
    connect_timeout_seconds: float = Field(default=10.0, gt=0, le=600)
    max_result_chars: int = Field(default=16000, ge=100)
    # Only these of its tools are offered (default: all it lists).
    tools: list[str] | None = None

    @model_validator(mode="after")
    def _one_transport(self) -> "McpServer":
        if (self.command is None) == (self.url is None):
            raise ValueError('give either "command" (a stdio server) or "url" (streamable HTTP), not both')
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError(f'url must be http:// or https://, not "{self.url}"')
        if self.command is None and (self.args or self.env or self.cwd):
            raise ValueError('"args", "env" and "cwd" belong to a stdio server ("command")')
        if self.url is None and (self.headers or self.headers_env):
            raise ValueError('"headers" and "headers_env" belong to a remote server ("url")')
        return self

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "stdio" if self.command is not None else "http"

    def check_environment(self) -> None:
        missing = [variable for variable in self.headers_env.values() if secret_from_env(variable) is None]
        if missing:
            raise ValueError(f"headers_env: the environment variable {missing[0]} is not set")

    def request_headers(self) -> dict[str, str]:
        """Plain headers plus the secret ones, read now (never logged)."""
        return self.headers | {header: secret_from_env(variable) or ""
                               for header, variable in self.headers_env.items()}

    def offers(self, tool_name: str) -> bool:
        return self.tools is None or tool_name in self.tools
