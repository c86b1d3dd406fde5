"""The MCP gateway's dialect: JSON-RPC messages of the Model Context Protocol
over streamable HTTP, as clients send them to /mcp, and the answers they
expect, in both eras the official SDKs speak:

- the session era (2024-11-05 .. 2025-11-25): `initialize` first, then every
  request carries the `Mcp-Session-Id` the gateway gave and the
  `MCP-Protocol-Version` it agreed;
- the stateless era (2026-07-28): no handshake; every request carries its
  protocol version and the client's capabilities in `params._meta`, and
  mirrors its method (and the tool, prompt or resource it names) in the
  `Mcp-Method` and `Mcp-Name` headers; `server/discover` says what the
  server is; results carry `resultType` (and, for listings, how long and by
  whom they may be cached).

A request's era is decided by what it sends: a stateless-era version in the
`MCP-Protocol-Version` header (or, without that header, in `params._meta`)
is the stateless era; anything else is the session era.

On `/mcp` the servers' tools and prompts are named `<server>__<name>`: the
one form every agent's tool-name rules accept (Claude's and OpenAI's
`^[a-zA-Z0-9_-]{1,64}$`, Gemini's), and Claude Code's own `mcp__<server>__`
prefix nests it readably. On `/mcp/<server>` they keep their own names.
Pure functions and small values: no I/O here.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

from dialects.nesting import MAX_DEPTH, depth

HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
MODERN_VERSIONS = ("2026-07-28",)
LATEST_HANDSHAKE = HANDSHAKE_VERSIONS[-1]
PROTOCOL_VERSION_META = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_META = "io.modelcontextprotocol/clientCapabilities"
CLIENT_INFO_META = "io.modelcontextprotocol/clientInfo"
SERVER_INFO_META = "io.modelcontextprotocol/serverInfo"

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = -32700, -32600, -32601, -32602, -32603
HEADER_MISMATCH, UNSUPPORTED_PROTOCOL_VERSION = -32020, -32022
# The stateless era's HTTP status for an error code (others: 200), as the SDKs' servers answer.
MODERN_ERROR_STATUS = {PARSE_ERROR: 400, INVALID_REQUEST: 400, INVALID_PARAMS: 400, HEADER_MISMATCH: 400,
                       -32021: 400, UNSUPPORTED_PROTOCOL_VERSION: 400, METHOD_NOT_FOUND: 404}
# Method -> the param an `Mcp-Name` header mirrors.
NAME_BEARING = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
SEPARATOR = "__"
SERVER_INFO = {"name": "switchboard", "title": "Switchboard MCP gateway", "version": "1"}
CAPABILITIES = {"tools": {"listChanged": False}, "resources": {}, "prompts": {}, "completions": {}}
# How long a stateless-era client may keep a listing (it is the key's own: "private").
LISTING_TTL_MS = 30_000
LISTINGS = {"tools/list": "tools", "resources/list": "resources", "resources/templates/list": "resourceTemplates",
            "prompts/list": "prompts"}
Era = Literal["session", "stateless"]


@dataclass
class RpcError(Exception):
    code: int
    message: str
    data: Any = None

    def body(self) -> dict:
        return {"code": self.code, "message": self.message} | ({"data": self.data} if self.data is not None else {})


@dataclass(frozen=True)
class Message:
    method: str | None
    id: str | int | None = None
    params: dict = field(default_factory=dict)
    has_id: bool = False

    @property
    def is_request(self) -> bool:
        return self.has_id and self.method is not None

    @property
    def meta(self) -> dict:
        meta = self.params.get("_meta")
        return meta if isinstance(meta, dict) else {}


def parse_message(body: bytes | str) -> Message:
    """One JSON-RPC message (a request, a notification, or a response the
    client posts), or RpcError naming what is wrong."""
    too_deep = RpcError(INVALID_REQUEST, f"the message nests deeper than {MAX_DEPTH} levels (arguments included): "
                                         "this gateway takes none deeper")
    try:
        value = json.loads(body)
    except RecursionError:
        raise too_deep from None
    except ValueError:
        raise RpcError(PARSE_ERROR, "Parse error: the body is not JSON") from None
    if depth(value) > MAX_DEPTH:
        raise too_deep
    if isinstance(value, list):
        raise RpcError(INVALID_REQUEST, "a batch is not accepted: send one JSON-RPC message per POST")
    if not isinstance(value, dict) or value.get("jsonrpc") != "2.0":
        raise RpcError(INVALID_REQUEST, 'the body must be one JSON-RPC 2.0 message: an object with "jsonrpc": "2.0"')
    has_id, request_id = "id" in value, value.get("id")
    if has_id and (isinstance(request_id, bool) or not isinstance(request_id, (str, int))):
        raise RpcError(INVALID_REQUEST, '"id" must be a string or an integer')
    method, params = value.get("method"), value.get("params", {})
    if method is None and ("result" in value or "error" in value):
        return Message(None, request_id, {}, has_id)  # a response to a request of ours (we send none)
    if not isinstance(method, str) or not method:
        raise RpcError(INVALID_REQUEST, '"method" must be a non-empty string')
    if not isinstance(params, dict):
        raise RpcError(INVALID_PARAMS, '"params" must be an object')
    return Message(method, request_id, params, has_id)


def era_of(message: Message, version_header: str | None) -> Era:
    version = version_header if version_header is not None else message.meta.get(PROTOCOL_VERSION_META)
    return "stateless" if version in MODERN_VERSIONS else "session"


def check_stateless(message: Message, headers: Callable[[str], str | None]) -> str:
    """The stateless era's checks of one request (its envelope, then its
    headers against its body, then its version): the version, or RpcError."""
    meta = message.params.get("_meta")
    if not isinstance(meta, dict):
        raise RpcError(INVALID_PARAMS, f'params._meta must be an object carrying "{PROTOCOL_VERSION_META}" and '
                                       f'"{CLIENT_CAPABILITIES_META}"')
    missing = [k for k in (PROTOCOL_VERSION_META, CLIENT_CAPABILITIES_META) if k not in meta]
    if missing:
        raise RpcError(INVALID_PARAMS, f"params._meta is missing {', '.join(missing)}")
    version = meta[PROTOCOL_VERSION_META]
    if headers("mcp-protocol-version") != version:
        raise RpcError(HEADER_MISMATCH, "the MCP-Protocol-Version header does not match params._meta's version")
    if headers("mcp-method") != message.method:
        raise RpcError(HEADER_MISMATCH, "the Mcp-Method header does not match the body's method")
    named = NAME_BEARING.get(message.method or "")
    if named is not None and message.params.get(named) is not None \
            and headers("mcp-name") != message.params.get(named):
        raise RpcError(HEADER_MISMATCH, f"the Mcp-Name header does not match the body's {named}")
    if version not in MODERN_VERSIONS:
        raise RpcError(UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version",
                       {"supported": list(MODERN_VERSIONS), "requested": version})
    return version


def negotiated(requested) -> str:
    """The session era's version: the client's, if we speak it, else our latest."""
    return requested if requested in HANDSHAKE_VERSIONS else LATEST_HANDSHAKE


def initialize_result(requested, instructions: str) -> dict:
    return {"protocolVersion": negotiated(requested), "capabilities": CAPABILITIES, "serverInfo": SERVER_INFO,
            "instructions": instructions}


def discover_result(instructions: str) -> dict:
    return {"supportedVersions": list(MODERN_VERSIONS), "capabilities": CAPABILITIES, "instructions": instructions,
            "cacheScope": "private", "ttlMs": LISTING_TTL_MS}


# Fields only the stateless era's results have; a session-era client gets none of them.
_STATELESS_FIELDS = ("resultType", "ttlMs", "cacheScope")


def for_era(era: Era, method: str, result: dict) -> dict:
    """A result as the client's era shapes it (an upstream server's may be of either)."""
    sent_meta = result.get("_meta") if isinstance(result.get("_meta"), dict) else {}
    meta = {k: v for k, v in sent_meta.items() if k != SERVER_INFO_META}
    result = {k: v for k, v in result.items() if k not in _STATELESS_FIELDS and k != "_meta"}
    if era == "session":
        return result | ({"_meta": meta} if meta else {})
    extra = {"ttlMs": LISTING_TTL_MS, "cacheScope": "private"} if method in LISTINGS else {}
    return result | extra | {"resultType": "complete", "_meta": meta | {SERVER_INFO_META: SERVER_INFO}}


def response(message: Message, result: dict) -> dict:
    return {"jsonrpc": "2.0", "id": message.id, "result": result}


def error_response(request_id, error: RpcError) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "error": error.body()}


def error_status(era: Era, error: RpcError) -> int:
    return MODERN_ERROR_STATUS.get(error.code, 200) if era == "stateless" else _SESSION_STATUS.get(error.code, 200)


# The session era's HTTP errors are transport failures only (a body that is not JSON-RPC).
_SESSION_STATUS = {PARSE_ERROR: 400, INVALID_REQUEST: 400}


@dataclass(frozen=True)
class Names:
    """How one endpoint names its servers' tools and prompts: `/mcp/<server>`
    their own names, `/mcp` `<server>__<name>`."""

    servers: tuple[str, ...]  # those the endpoint reaches for this key, in the registry's order
    single: bool

    def outward(self, server: str, name: str) -> str:
        return name if self.single else f"{server}{SEPARATOR}{name}"

    def inward(self, name: str) -> tuple[str, str] | None:
        """(server, its own name), or None for a name no server of this endpoint has."""
        if self.single:
            return (self.servers[0], name) if self.servers else None
        for server in sorted(self.servers, key=len, reverse=True):  # "a__b" before "a"
            if name.startswith(server + SEPARATOR) and len(name) > len(server) + len(SEPARATOR):
                return server, name[len(server) + len(SEPARATOR):]
        return None


def merged_listing(method: str, listings: dict[str, list[dict]], names: Names,
                   allowed: Callable[[str, dict], bool]) -> dict:
    """The servers' listings of one kind as one: renamed, filtered by what
    the key may use, in the servers' order."""
    field_name = LISTINGS[method]
    items = []
    for server in names.servers:
        for item in listings.get(server, []):
            if not allowed(server, item):
                continue
            if "name" in item and method in ("tools/list", "prompts/list"):
                item = item | {"name": names.outward(server, item["name"])}
            items.append(item)
    return {field_name: items}


def call_target(message: Message, names: Names) -> tuple[str, str]:
    """(server, its own name) of a tools/call or prompts/get, or RpcError."""
    name = message.params.get("name")
    if not isinstance(name, str) or not name:
        raise RpcError(INVALID_PARAMS, '"params.name" must be a non-empty string')
    arguments = message.params.get("arguments")
    if arguments is not None and not isinstance(arguments, dict):
        raise RpcError(INVALID_PARAMS, '"params.arguments" must be an object')
    target = names.inward(name)
    if target is None:
        kind = "tool" if message.method == "tools/call" else "prompt"
        raise RpcError(INVALID_PARAMS, f'Unknown {kind}: "{name}" is not among the {kind}s this key may use here')
    return target


def upstream_params(message: Message, own_name: str | None) -> dict:
    """The params sent on to the server: its own name for the tool or prompt,
    without our client's envelope (the pool speaks its own session)."""
    params = {k: v for k, v in message.params.items() if k != "_meta"}
    return params | ({"name": own_name} if own_name is not None else {})


def progress_token(message: Message):
    token = message.meta.get("progressToken")
    return token if isinstance(token, (str, int)) and not isinstance(token, bool) else None
