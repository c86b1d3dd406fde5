"""API keys: who a presented key is. Off unless configured. Keys are held
only as SHA-256 digests and compared in constant time; a key's name (never
the key) is used in logs and metrics. The web process's hook that asks
for one is app/auth.py. Sources: a TOML file
(SWITCHBOARD_KEYS_FILE) of

    [keys.alice]
    sha256 = "<hex digest of the key>"    # scripts/hash_key.py prints it
    models = ["*"]                         # fnmatch patterns (default: all)
    max_concurrent = 4                     # optional per-key limits
    requests_per_minute = 120
    weight = 2.0                           # share of a busy queue (default 1)
    mcp_servers = ["time", "git/git_status"]  # MCP servers, or a server's tools, it may use (fnmatch;
                                           # default: all, or none with SWITCHBOARD_MCP_DEFAULT_DENY)
    tool_calls_per_minute = 60             # its calls through the MCP gateway (/mcp), beside requests_per_minute
    daily_tokens = 200000                  # a daily token budget (UTC days); over it, 429 until midnight
    admin = true                           # may open the console (/admin) and read everyone's usage
    log_bodies = true                      # its prompts and replies are kept in the request log
    guard = "block"                        # the guard's policy for its requests where stricter than the
                                           # model's: "log", "redact" or "block" (guard/policy.py)

    [keys.alice.mcp_headers_env.tracker]   # its own credentials for a remote MCP server: header ->
    Authorization = "ALICE_TRACKER_AUTH"   # the server's environment variable holding the value

and, with sign-in on (identity/signin.py), what the keys signed-in people mint
may do: `[signin]` (limits as a key's, without `sha256`), or the first
`[signin.groups.<group>]` of a group the person is in.

The file is read again when it changes (checked at most once a second), so
keys added or revoked with `python scripts/admin.py keys ...` take effect
without a restart. With a keys file configured, keys are on even while it
lists none.

and/or SWITCHBOARD_API_KEYS="alice:key1,bob:key2" (hashed when read). Keys
people mint (identity/own_keys.py) are found in Redis by their digest when no
file key matches.

Clients from a trusted network (SWITCHBOARD_TRUSTED_NETWORKS, CIDRs) need no key: each such
address is a person of its own (`trusted:<address>`).
"""
from __future__ import annotations

import fnmatch
import hashlib
import hmac
import ipaddress
import logging
import time
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from catalog.mcp import Grants, check_grant_pattern
from identity.people import NAME
from protocol.errors import SwitchboardError

log = logging.getLogger(__name__)

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
    mcp_servers: tuple[str, ...] = ("*",)  # Grants' patterns
    tool_calls_per_minute: int | None = None  # through the MCP gateway (else the operator's default)
    # server -> (header, environment variable) pairs: its own credentials for remote MCP servers
    mcp_headers_env: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()
    daily_tokens: int | None = None  # a budget of prompt + completion tokens per UTC day
    guard: str = ""  # the guard policy its requests get where stricter than their model's ("": the model's)
    admin: bool = False
    log_bodies: bool = False  # its request bodies and replies go into the request log
    from_file: bool = False  # (else from SWITCHBOARD_API_KEYS: kept when the file is read again)
    key_id: str = ""  # which of a person's minted keys it is (identity/own_keys.py); "" for the file's and env's
    resource: str = ""  # the path (and those below it) that alone takes it: an MCP agent's token, "/mcp"

    # A minted key's models are those it asked for AND its policy's: both sets of patterns must match.
    within: tuple[str, ...] | None = None

    def allows(self, model: str) -> bool:
        return any(fnmatch.fnmatchcase(model, pattern) for pattern in self.models) and \
            (self.within is None or any(fnmatch.fnmatchcase(model, pattern) for pattern in self.within))

    @property
    def grants(self) -> Grants:
        return Grants(self.mcp_servers)

    def own_headers_env(self, server: str) -> dict[str, str]:
        return dict(next((pairs for name, pairs in self.mcp_headers_env if name == server), ()))


ANONYMOUS = ApiKey("anonymous")
# A signed-in person's name as every route sees it (limits, usage, the request log): a namespace of its own,
# which no key of the file or the environment can name (a `:` is refused there), so that a provider's
# username `ops` is never the `ops` key.
SIGNED_IN = "signin:"
KEY_NAME = NAME  # (identity/people.py: the names a person or a key may have)
LIMIT_FIELDS = frozenset({"models", "max_concurrent", "requests_per_minute", "weight", "mcp_servers",
                          "tool_calls_per_minute", "daily_tokens", "guard"})
KEY_FIELDS = LIMIT_FIELDS | {"sha256", "admin", "log_bodies", "mcp_headers_env"}


def signed_in_name(person: str) -> str:
    return SIGNED_IN + person


def _key_name(name: str, where: str) -> str:
    if not KEY_NAME.fullmatch(name):
        raise ValueError(f"{where}: {name[:100]!r} is not a key's name here (letters, digits and ._@+-; a `:` "
                         f"is kept for the names Switchboard gives: {SIGNED_IN}<person>, trusted:<address>)")
    return name


def _known_fields(where: str, table: dict, known: frozenset[str]) -> dict:
    unknown = sorted(set(table) - known)
    if unknown:
        raise ValueError(f"keys file: {where} has no field {unknown[0]!r} (its fields: {', '.join(sorted(known))})")
    return table


# Who changed the keys file, when the admin tool did not say it had.
BY_HAND_AUTHOR = "the keys file, edited outside scripts/admin.py"


def public_view(keys: list[ApiKey]) -> dict:
    """The keys file's keys as the audit log compares them: name -> limits,
    and a fingerprint that changes when the key is replaced (a hash of its
    digest: nothing that leads back to the key)."""
    return {k.name: {"key": hashlib.sha256(k.sha256.encode()).hexdigest()[:8], "models": list(k.models),
                     "max_concurrent": k.max_concurrent, "requests_per_minute": k.requests_per_minute,
                     "weight": k.weight, "daily_tokens": k.daily_tokens, "mcp_servers": list(k.mcp_servers),
                     "tool_calls_per_minute": k.tool_calls_per_minute,
                     "mcp_headers_env": {server: dict(pairs) for server, pairs in k.mcp_headers_env},
                     "admin": k.admin, "log_bodies": k.log_bodies,
                     **({"guard": k.guard} if k.guard else {})} for k in keys}


class KeyRing:
    def __init__(self, keys: list[ApiKey], trusted_networks: tuple = (), file: Path | None = None,
                 default_grants: tuple[str, ...] = ("*",), policy: SignInPolicy | None = None):
        self._keys = keys
        self._default_grants = default_grants
        self.policy = policy or SignInPolicy(ApiKey("", mcp_servers=default_grants))
        # Sign-in (identity/signin.py) turns keys on, and adds the keys people mint: found by digest.
        self.signin = False
        self.find_minted: Callable[[str], ApiKey | None] = lambda digest: None
        self._trusted = trusted_networks
        self._file, self._fixed = file, [k for k in keys if not k.from_file] if file else keys
        self._mtime = _mtime(file)
        self._checked = time.monotonic()
        # Told the file's keys before and after each reload (the audit log's).
        self.on_reload: Callable[[list[ApiKey], list[ApiKey]], None] = lambda before, after: None

    @property
    def file_keys(self) -> list[ApiKey]:
        return [k for k in self._keys if k.from_file]

    @property
    def has_file(self) -> bool:
        return self._file is not None

    @property
    def enabled(self) -> bool:
        return bool(self._keys) or self._file is not None or self.signin

    def refresh(self) -> None:
        """Read the keys file again if it changed (at most once a second); a
        file that cannot be read keeps the keys as they were."""
        now = time.monotonic()
        if self._file is None or now - self._checked < 1.0:
            return
        self._checked = now
        mtime = _mtime(self._file)
        if mtime == self._mtime:
            return
        before = self.file_keys
        try:
            self._keys = read_keys_file(self._file, self._default_grants) + self._fixed
            self.policy = read_signin_policy(self._file, self._default_grants)
            self._mtime = mtime
        except (OSError, ValueError, KeyError, tomllib.TOMLDecodeError) as error:
            log.warning("keys file %s not reloaded: %s", self._file, error)
            return
        self.on_reload(before, self.file_keys)

    def _trusted_address(self, address: str | None) -> bool:
        try:
            ip = ipaddress.ip_address(address or "")
        except ValueError:
            return False
        return any(ip in network for network in self._trusted)

    def identify(self, presented: str | None, address: str | None = None) -> ApiKey:
        self.refresh()
        if not self.enabled:
            return ANONYMOUS
        if not presented and self._trusted_address(address):
            return ApiKey(name=f"trusted:{address}", mcp_servers=self._default_grants)
        candidate = digest(presented or "")
        found = None
        for key in self._keys:  # no early exit: the time does not depend on which key matched
            if hmac.compare_digest(key.sha256, candidate) and presented:
                found = key
        if found is None and presented:
            found = self.find_minted(candidate)
        if found is None:
            raise SwitchboardError(UNAUTHORIZED, 401)
        return found


def presented_key(authorization: str | None, header_keys: tuple[str | None, ...] = (),
                  path_key: str | None = None, query_key: str | None = None) -> str | None:
    """The first key presented: the URL path's, a key header's (x-api-key,
    x-goog-api-key), a non-empty Bearer, the query's."""
    if path_key:
        return path_key
    for key in header_keys:
        if key and key.strip():
            return key.strip()
    if authorization and authorization.lower().startswith("bearer ") and authorization[7:].strip():
        return authorization[7:].strip()
    return query_key or None


def networks(cidrs: str | None, variable: str) -> tuple:
    """Comma-separated CIDRs (a setting's), or ValueError naming the setting."""
    try:
        return tuple(ipaddress.ip_network(c.strip(), strict=False) for c in (cidrs or "").split(",") if c.strip())
    except ValueError as error:
        raise ValueError(f"{variable}: {error}") from None


def trusted_networks(cidrs: str | None) -> tuple:
    return networks(cidrs, "SWITCHBOARD_TRUSTED_NETWORKS")


def _weight(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError(f"keys file: {name}.weight must be a number above 0, not {value!r}")
    return float(value)


def _mtime(file: Path | None) -> int | None:
    try:
        return file.stat().st_mtime_ns if file is not None else None
    except OSError:
        return None


def _positive(name: str, field: str, value) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"keys file: {name}.{field} must be a whole number above 0, not {value!r}")
    return value


def _grants(name: str, table: dict, default: tuple[str, ...]) -> tuple[str, ...]:
    patterns = table.get("mcp_servers")
    if patterns is None:
        return default
    try:
        return tuple(check_grant_pattern(p) for p in patterns)
    except (TypeError, ValueError) as error:
        raise ValueError(f"keys file: {name}.mcp_servers: {error}") from None


def _headers_env(name: str, table: dict) -> tuple:
    servers = table.get("mcp_headers_env", {})
    if not isinstance(servers, dict) or not all(
            isinstance(headers, dict) and all(isinstance(v, str) and v for v in headers.values())
            for headers in servers.values()):
        raise ValueError(f"keys file: keys.{name}.mcp_headers_env maps a server to {{ header = \"VARIABLE\" }}")
    return tuple((server, tuple(headers.items())) for server, headers in servers.items())


def _limits(name: str, table: dict, default_grants: tuple[str, ...]) -> dict:
    """A key's (or a sign-in policy's) models and limits, checked."""
    return dict(models=tuple(table.get("models", ["*"])),
                max_concurrent=_positive(name, "max_concurrent", table.get("max_concurrent")),
                requests_per_minute=_positive(name, "requests_per_minute", table.get("requests_per_minute")),
                weight=_weight(name, table.get("weight", 1.0)), mcp_servers=_grants(name, table, default_grants),
                tool_calls_per_minute=_positive(name, "tool_calls_per_minute", table.get("tool_calls_per_minute")),
                daily_tokens=_positive(name, "daily_tokens", table.get("daily_tokens")),
                guard=_guard(name, table.get("guard", "")))


def _guard(name: str, value) -> str:
    if value not in ("", "log", "redact", "block"):
        raise ValueError(f'keys file: {name}.guard must be "log", "redact" or "block" (a policy stricter than '
                         f"its models'), not {str(value)[:40]!r}")
    return value


def _document(file: Path) -> dict:
    """The keys file's tables, its top level checked (a field it does not know is an error naming it)."""
    document = tomllib.loads(file.read_text())
    return _known_fields("the top level", document, frozenset({"keys", "signin"}))


def read_keys_file(file: Path, default_grants: tuple[str, ...] = ("*",)) -> list[ApiKey]:
    keys = []
    for name, table in _document(file).get("keys", {}).items():
        _known_fields(f"keys.{_key_name(name, 'keys file: keys')}", table, KEY_FIELDS)
        if not isinstance(table.get("sha256"), str):
            raise ValueError(f"keys file: keys.{name}.sha256 is missing (scripts/hash_key.py prints it)")
        keys.append(ApiKey(name=name, sha256=table["sha256"].lower(),
                           **_limits(f"keys.{name}", table, default_grants),
                           mcp_headers_env=_headers_env(name, table),
                           admin=table.get("admin") is True, log_bodies=table.get("log_bodies") is True,
                           from_file=True))
    return keys


@dataclass(frozen=True)
class SignInPolicy:
    """What the keys a signed-in person mints may do: the keys file's
    `[signin]` table, or the first `[signin.groups.<group>]` of a group the
    person is in (their provider's group claim), in the file's order."""

    default: ApiKey = ApiKey("")
    groups: tuple[tuple[str, ApiKey], ...] = ()

    def template(self, groups: tuple[str, ...]) -> ApiKey:
        return next((limits for group, limits in self.groups if group in groups), self.default)

    def key_of(self, person: str, groups: tuple[str, ...], models: tuple[str, ...] | None, key_id: str) -> ApiKey:
        """A minted key as every route sees it: the person's (namespaced)
        name, the policy's limits for their groups now, and the models it was
        minted for, within those the policy allows (both must match)."""
        template = self.template(groups)
        return replace(template, name=signed_in_name(person), models=models or template.models,
                       within=template.models if models else None, key_id=key_id)


def read_signin_policy(file: Path | None, default_grants: tuple[str, ...] = ("*",)) -> SignInPolicy:
    """`[signin]`, and each `[signin.groups.<group>]` as `[signin]` with what it sets replaced (a group
    table widens or narrows only what it names)."""
    table = _document(file).get("signin", {}) if file is not None else {}
    if not isinstance(table, dict):
        raise ValueError("keys file: signin is a table of the limits signed-in people's keys get")
    groups = table.get("groups", {})
    if not isinstance(groups, dict) or not all(isinstance(limits, dict) for limits in groups.values()):
        raise ValueError("keys file: signin.groups maps a group's name to its limits")
    base = _known_fields("signin", {k: v for k, v in table.items() if k != "groups"}, LIMIT_FIELDS)
    return SignInPolicy(ApiKey("", **_limits("signin", base, default_grants)),
                        tuple((group, ApiKey("", **_limits(f"signin.groups.{group}", base | _known_fields(
                            f"signin.groups.{group}", limits, LIMIT_FIELDS), default_grants)))
                              for group, limits in groups.items()))


def load_keys(file: Path | None, pairs: str | None, trusted: str | None = None,
              mcp_default_deny: bool = False) -> KeyRing:
    """`mcp_default_deny`: a key that names no `mcp_servers` reaches none."""
    default_grants = () if mcp_default_deny else ("*",)
    keys: list[ApiKey] = read_keys_file(file, default_grants) if file is not None else []
    for pair in filter(None, (p.strip() for p in (pairs or "").split(","))):
        name, _, key = pair.partition(":")
        if not key:
            raise ValueError("SWITCHBOARD_API_KEYS entries look like name:key")
        keys.append(ApiKey(name=_key_name(name, "SWITCHBOARD_API_KEYS"), sha256=digest(key),
                           mcp_servers=default_grants))
    return KeyRing(keys, trusted_networks(trusted), file, default_grants, read_signin_policy(file, default_grants))
