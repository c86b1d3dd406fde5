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
own table; a key may be limited to some servers, or some tools of a server,
in the keys file (`Grants`). Secrets sit in environment variables and are
read when a worker connects: the registry, logs and errors hold only the
variables' names.

A stdio server is shared by every caller of the process that started it,
unless `per_person = true` (one process per person, for servers that keep a
person's state); a remote server's `headers_env` may be given per person in
the keys file (`[keys.alice.mcp_headers_env.tickets]`), so each person's calls
carry their own token.

    [mcp_servers.wiki]                     # tools that act as the person: each connects their own account
    url = "https://wiki.example/mcp"
    auth = "oauth"                         # OAuth 2.1 as MCP specifies it: discovered, registered, per person
    oauth_client_id = "switchboard"        # optional: a client the operator registered there
    oauth_client_secret_env = "WIKI_OAUTH_SECRET"
    oauth_scopes = ["read", "write"]       # optional (default: what the server's metadata names)

A person connects such a server once on /me; until they do, a call of theirs
is answered with the URL to connect it, never with anyone else's token.
"""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass
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
    # A stdio server started once per person who calls it (else one per process, shared).
    per_person: bool = False
    # "oauth": a remote server whose tools act as the person calling: each person connects their own
    # account on it (OAuth, identity/mcp_accounts.py), and calls carry their token, never a shared one.
    auth: Literal["oauth"] | None = None
    oauth_client_id: str | None = None  # a client the operator registered at its authorization server
    oauth_client_secret_env: str | None = None  # the environment variable holding that client's secret
    oauth_scopes: list[str] = Field(default_factory=list)  # asked for (default: what the server names)

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
        if self.per_person and self.command is None:
            raise ValueError('"per_person" belongs to a stdio server ("command")')
        if self.auth is None and (self.oauth_client_id or self.oauth_client_secret_env or self.oauth_scopes):
            raise ValueError('"oauth_client_id", "oauth_client_secret_env" and "oauth_scopes" belong to a server '
                             'with auth = "oauth"')
        if self.auth == "oauth" and self.url is None:
            raise ValueError('auth = "oauth" belongs to a remote server ("url")')
        if self.auth == "oauth" and any(h.lower() == "authorization" for h in (*self.headers, *self.headers_env)):
            raise ValueError('a server with auth = "oauth" carries each person\'s own token: it takes no '
                             "Authorization header of the operator's")
        if self.oauth_client_secret_env and not self.oauth_client_id:
            raise ValueError('"oauth_client_secret_env" needs "oauth_client_id"')
        return self

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "stdio" if self.command is not None else "http"

    def check_environment(self) -> None:
        missing = [variable for variable in (*self.headers_env.values(), self.oauth_client_secret_env)
                   if variable and secret_from_env(variable) is None]
        if missing:
            raise ValueError(f"headers_env: the environment variable {missing[0]} is not set")

    def request_headers(self, own: dict[str, str] | None = None) -> dict[str, str]:
        """Plain headers plus the secret ones, read now (never logged);
        `own`: a person's own header -> variable, over the server's."""
        return self.headers | {header: secret_from_env(variable) or ""
                               for header, variable in (self.headers_env | (own or {})).items()}

    def session_of(self, person: str, own: dict[str, str]) -> tuple[str, dict[str, str]]:
        """Whose session with this server a call of `person` takes, and the
        credentials of their own it carries: theirs for a per-person server,
        an OAuth one or a remote one they have credentials for, else the
        shared one ("")."""
        own = own if self.transport == "http" else {}
        return (person if self.per_person or own or self.auth == "oauth" else ""), own

    def offers(self, tool_name: str) -> bool:
        return self.tools is None or tool_name in self.tools


@dataclass(frozen=True)
class Grants:
    """What a key may reach of the MCP servers: fnmatch patterns, each a
    server (`"time"`, `"ti*"`: all its tools) or a server's tools
    (`"git/git_status"`, `"tickets/read_*"`). The one place a key's MCP
    permissions are decided: the gateway's listings and calls and the
    server-side tool loop ask it."""

    patterns: tuple[str, ...] = ("*",)

    def _split(self) -> list[tuple[str, str]]:
        return [(server, tool or "*") for server, _, tool in (p.partition("/") for p in self.patterns)]

    def may_use_server(self, server: str) -> bool:
        """Some tool of the server, at least."""
        return any(fnmatch.fnmatchcase(server, pattern) for pattern, _ in self._split())

    def may_use(self, server: str, tool: str) -> bool:
        return any(fnmatch.fnmatchcase(server, s) and fnmatch.fnmatchcase(tool, t) for s, t in self._split())

    def whole_server(self, server: str) -> bool:
        """Every tool of it (so its resources and prompts too)."""
        return any(fnmatch.fnmatchcase(server, s) and t == "*" for s, t in self._split())

    def for_server(self, server: str) -> list[str]:
        """The patterns that touch this server, with its name spelt out (a
        job carries them: the worker needs no fnmatch over server names)."""
        if self.whole_server(server):
            return [server]
        return [f"{server}/{t}" for s, t in self._split() if fnmatch.fnmatchcase(server, s)]


def check_grant_pattern(pattern) -> str:
    """A keys-file entry of `mcp_servers`, or ValueError naming what is wrong."""
    if not isinstance(pattern, str) or not pattern or pattern.count("/") > 1 or pattern.startswith("/"):
        raise ValueError(f'an mcp_servers entry is "server" or "server/tool" (fnmatch patterns), not {pattern!r}')
    return pattern
