"""API keys, and their enforcement: off unless configured. Keys are held
only as SHA-256 digests and compared in constant time; a key's name (never
the key) is used in logs and metrics. Every route needs a key, except views
marked `@public` where they are defined. Sources: a TOML file
(SWITCHBOARD_KEYS_FILE) of

    [keys.alice]
    sha256 = "<hex digest of the key>"    # scripts/hash_key.py prints it
    models = ["*"]                         # fnmatch patterns (default: all)
    max_concurrent = 4                     # optional per-key limits
    requests_per_minute = 120
    weight = 2.0                           # share of a busy queue (default 1)
    mcp_servers = ["time"]                 # server-side tools it may use (fnmatch; default: all)

and/or SWITCHBOARD_API_KEYS="alice:key1,bob:key2" (hashed when read).

A key is presented in the URL path (`/k/<key>/...`, see app/pathkey.py: the
operator's explicit choice, so it wins over whatever a client's fixed header
holds), as `x-api-key`, or as `Authorization: Bearer <key>`. Clients from a
trusted network (SWITCHBOARD_TRUSTED_NETWORKS, CIDRs) need no key: each such
address is a person of its own (`trusted:<address>`).
"""
from __future__ import annotations

import fnmatch
import hashlib
import hmac
import ipaddress
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from flask import Flask, current_app, g, request

from app.pathkey import PATH_KEY
from protocol.errors import SwitchboardError

# One message for a missing and a wrong key, so keys cannot be probed.
UNAUTHORIZED = "invalid or missing API key: send Authorization: Bearer <key> or x-api-key"


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True)
class ApiKey:
    name: str
    sha256: str = ""
    models: tuple[str, ...] = ("*",)
    max_concurrent: int | None = None
    requests_per_minute: int | None = None
    weight: float = 1.0
    mcp_servers: tuple[str, ...] = ("*",)

    def allows(self, model: str) -> bool:
        return any(fnmatch.fnmatchcase(model, pattern) for pattern in self.models)

    def may_use_server(self, server: str) -> bool:
        return any(fnmatch.fnmatchcase(server, pattern) for pattern in self.mcp_servers)


ANONYMOUS = ApiKey("anonymous")


class KeyRing:
    def __init__(self, keys: list[ApiKey], trusted_networks: tuple = ()):
        self._keys = keys
        self._trusted = trusted_networks

    @property
    def enabled(self) -> bool:
        return bool(self._keys)

    def _trusted_address(self, address: str | None) -> bool:
        try:
            ip = ipaddress.ip_address(address or "")
        except ValueError:
            return False
        return any(ip in network for network in self._trusted)

    def identify(self, presented: str | None, address: str | None = None) -> ApiKey:
        if not self.enabled:
            return ANONYMOUS
        if not presented and self._trusted_address(address):
            return ApiKey(name=f"trusted:{address}")
        candidate = digest(presented or "")
        found = None
        for key in self._keys:  # no early exit: the time does not depend on which key matched
            if hmac.compare_digest(key.sha256, candidate) and presented:
                found = key
        if found is None:
            raise SwitchboardError(UNAUTHORIZED, 401)
        return found


def presented_key(authorization: str | None, x_api_key: str | None, path_key: str | None = None) -> str | None:
    """The first key presented: the URL path's, x-api-key, a non-empty Bearer."""
    if path_key:
        return path_key
    if x_api_key and x_api_key.strip():
        return x_api_key.strip()
    if authorization and authorization.lower().startswith("bearer ") and authorization[7:].strip():
        return authorization[7:].strip()
    return None


def trusted_networks(cidrs: str | None) -> tuple:
    try:
        return tuple(ipaddress.ip_network(c.strip(), strict=False) for c in (cidrs or "").split(",") if c.strip())
    except ValueError as error:
        raise ValueError(f"SWITCHBOARD_TRUSTED_NETWORKS: {error}") from None


def _weight(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError(f"keys file: keys.{name}.weight must be a number above 0, not {value!r}")
    return float(value)


def load_keys(file: Path | None, pairs: str | None, trusted: str | None = None) -> KeyRing:
    keys: list[ApiKey] = []
    if file is not None:
        document = tomllib.loads(file.read_text())
        for name, table in document.get("keys", {}).items():
            keys.append(ApiKey(name=name, sha256=table["sha256"].lower(), models=tuple(table.get("models", ["*"])),
                               max_concurrent=table.get("max_concurrent"),
                               requests_per_minute=table.get("requests_per_minute"),
                               weight=_weight(name, table.get("weight", 1.0)),
                               mcp_servers=tuple(table.get("mcp_servers", ["*"]))))
    for pair in filter(None, (p.strip() for p in (pairs or "").split(","))):
        name, _, key = pair.partition(":")
        if not key:
            raise ValueError("SWITCHBOARD_API_KEYS entries look like name:key")
        keys.append(ApiKey(name=name, sha256=digest(key)))
    return KeyRing(keys, trusted_networks(trusted))


# --- enforcement ---------------------------------------------------------------------
def public(view: Callable) -> Callable:
    """Mark a view that anyone may call, keys or not (liveness, version)."""
    view.public = True
    return view


def current_key() -> ApiKey:
    return g.get("api_key", ANONYMOUS)


def _is_public(app: Flask) -> bool:
    if request.routing_exception is not None:  # no such route: a 404 (405) in JSON, key or not
        return True
    view = app.view_functions.get(request.endpoint) if request.endpoint else None
    return bool(getattr(view, "public", False))


def install_auth(app: Flask, keys: KeyRing) -> None:
    """Before any work is done, a request to a non-public route must present
    a valid key (401 in its API's shape otherwise)."""
    @app.before_request
    def require_key():
        if not _is_public(current_app):
            presented = presented_key(request.headers.get("Authorization"), request.headers.get("x-api-key"),
                                      request.environ.get(PATH_KEY))
            g.api_key = keys.identify(presented, request.remote_addr)
