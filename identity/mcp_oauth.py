"""Switchboard as the OAuth 2.1 authorization server of its own MCP gateway
(the MCP authorization spec, 2025-11-25): an agent adds `/mcp` with no key,
registers itself (RFC 7591), sends its person here to sign in with the
office's provider and consent, and trades the code (PKCE, S256 only; the
`resource` of RFC 8707) for a short-lived access token and a refresh token.

- A client is public (no secret; PKCE proves the code's requester) and its
  redirect URIs are a loopback address (any port, RFC 8252 §7.3) or https.
  It registers (RFC 7591), or its client_id is the https URL of its client
  metadata document (the OAuth Client ID Metadata Document draft, which the
  MCP spec prefers), fetched here: https only, no redirect, at most 5 KB, and
  never from a host on the office's own networks unless the operator names
  it (`Documents`).
- A code lives 60 s, is taken once, and is bound to its client, redirect
  URI, PKCE challenge, resource and person.
- The refresh token is a login of identity/device_login.py, bound to the
  client and the resource, rotated at each use (OAuth 2.1 §4.3.1 for
  public clients); the access token is a key the person mints
  (identity/own_keys.py) that only the resource takes. So revoke-everything,
  suspension and a provider that stops answering end both, as they end
  every other credential of the person's.

Redis holds codes and refresh tokens as digests only. The web's face of it
is app/routes/oauth.py.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import json
import re
import secrets
import socket
import time
from dataclasses import dataclass
from typing import Callable
from urllib.parse import urlsplit

from redis import Redis

from identity.device_login import Refused
from identity.keys import digest
from protocol import keys

CLIENT_PREFIX = "sbc-"
CLIENT_DAYS = 180  # a registration unused this long is forgotten (the agent registers again)
CODE_SECONDS = 60
ASK_SECONDS = 600  # a consent page left open this long must be asked for again
MOST_REDIRECT_URIS = 10
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")  # (as urlsplit gives a hostname)
GRANTS = ("authorization_code", "refresh_token")
_VERIFIER = re.compile(r"[A-Za-z0-9\-._~]{43,128}")  # RFC 7636 §4.1
_CHALLENGE = re.compile(r"[A-Za-z0-9\-_]{43}")  # a SHA-256 in base64url, unpadded


class BadClient(Exception):
    """A registration refused (RFC 7591 §3.2.2: invalid_client_metadata, invalid_redirect_uri)."""

    def __init__(self, error: str, description: str):
        super().__init__(description)
        self.error, self.description = error, description


@dataclass(frozen=True)
class Ask:
    """An authorization request that passed every check: what the consent page shows and the code binds."""
    client_id: str
    client_name: str
    redirect_uri: str
    state: str
    code_challenge: str
    resource: str
    scope: str


def redirect_uri_allowed(uri: object) -> bool:
    """A loopback http address (a native agent's own listener) or https; no fragment, no userinfo."""
    if not isinstance(uri, str) or len(uri) > 500 or any(ch.isspace() for ch in uri):
        return False
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018 (a port that is not a number raises)
    except ValueError:
        return False
    if parts.fragment or "@" in parts.netloc or not parts.hostname:
        return False
    return parts.scheme == "https" or (parts.scheme == "http" and parts.hostname in LOOPBACK_HOSTS)


def _same_redirect(registered: str, given: str) -> bool:
    """Exact match, but a loopback URI's port may differ (RFC 8252 §7.3: the agent picks one per run)."""
    if registered == given:
        return True
    try:
        a, b = urlsplit(registered), urlsplit(given)
        b.port  # noqa: B018 (a port that is not a number raises)
    except ValueError:
        return False
    return a.scheme == "http" and a.hostname in LOOPBACK_HOSTS and not b.fragment and "@" not in b.netloc and \
        (a.scheme, a.hostname, a.path, a.query) == (b.scheme, b.hostname, b.path, b.query)


def register(redis: Redis, metadata: object) -> dict:
    """A public client registered from its metadata (RFC 7591); what the registration answers."""
    checked = _checked(metadata)
    client_id, now = CLIENT_PREFIX + secrets.token_urlsafe(16), int(time.time())
    record = {"client_id": client_id} | checked | {"client_id_issued_at": now}
    redis.set(keys.mcp_client_key(client_id), json.dumps(record), ex=CLIENT_DAYS * 86400)
    return record


def _checked(metadata: object) -> dict:
    """A public client's metadata as this server keeps it, or BadClient."""
    if not isinstance(metadata, dict):
        raise BadClient("invalid_client_metadata", "the body must be a JSON object of client metadata")
    uris = metadata.get("redirect_uris")
    if not isinstance(uris, list) or not uris or len(uris) > MOST_REDIRECT_URIS:
        raise BadClient("invalid_redirect_uri", f"redirect_uris: a list of 1 to {MOST_REDIRECT_URIS} URIs is needed")
    bad = next((uri for uri in uris if not redirect_uri_allowed(uri)), None)
    if bad is not None:
        raise BadClient("invalid_redirect_uri", f"redirect_uris: {str(bad)[:100]!r} is neither a loopback http "
                        "address nor https")
    method = metadata.get("token_endpoint_auth_method", "none")
    if method != "none":
        raise BadClient("invalid_client_metadata", f"token_endpoint_auth_method: {str(method)[:40]!r}; this server "
                        "registers public clients only (none), which prove themselves with PKCE")
    grants = metadata.get("grant_types", ["authorization_code", "refresh_token"])
    if not isinstance(grants, list) or not grants or any(grant not in GRANTS for grant in grants):
        raise BadClient("invalid_client_metadata", f"grant_types: only {', '.join(GRANTS)}")
    if metadata.get("response_types", ["code"]) != ["code"]:
        raise BadClient("invalid_client_metadata", "response_types: only [\"code\"]")
    name = metadata.get("client_name", "")
    if not isinstance(name, str) or len(name) > 100:
        raise BadClient("invalid_client_metadata", "client_name: a string of at most 100 characters")
    return {"client_name": name, "redirect_uris": uris, "grant_types": grants, "response_types": ["code"],
            "token_endpoint_auth_method": "none"}


# --- client metadata documents: a client_id that is the URL of the client's own metadata ---------------------
DOCUMENT_BYTES = 5 * 1024
DOCUMENT_SECONDS = 3600  # a fetched document is used this long before it is fetched again


class Documents:
    """Fetches client metadata documents, refusing what would make this server reach where it should not:
    anything but https, a redirect, a large answer, or a host on a private, loopback or link-local address
    (unless it is one of `office_hosts`, the operator's)."""

    def __init__(self, office_hosts: tuple[str, ...] = (), timeout: float = 5.0):
        self.office_hosts, self.timeout = tuple(host.lower() for host in office_hosts), timeout

    def fetch(self, url: str) -> dict:
        parts = urlsplit(url)
        if parts.scheme != "https" or not parts.hostname or parts.path in ("", "/") or parts.fragment or \
                "@" in parts.netloc or len(url) > 500:
            raise Unredirectable("invalid_client", "client_id: a client metadata document's URL is https, with a "
                                 "path, no fragment and no user")
        if parts.hostname.lower() not in self.office_hosts:
            self._check_public(parts.hostname, parts.port or 443)
        import httpx  # (the web process loads it only when an agent names a document)
        try:
            with httpx.Client(timeout=self.timeout, follow_redirects=False, trust_env=True) as http, \
                    http.stream("GET", url, headers={"Accept": "application/json"}) as answer:
                body = b""
                for chunk in answer.iter_bytes():
                    body += chunk
                    if len(body) > DOCUMENT_BYTES:
                        raise Unredirectable("invalid_client", "client_id: the client metadata document is larger "
                                             f"than {DOCUMENT_BYTES} bytes")
        except httpx.HTTPError as error:
            raise Unredirectable("invalid_client", f"client_id: the client metadata document could not be fetched "
                                 f"({type(error).__name__})") from None
        if answer.status_code != 200:
            raise Unredirectable("invalid_client", f"client_id: the client metadata document's URL answered "
                                 f"{answer.status_code} (redirects are not followed)")
        try:
            return json.loads(body)
        except ValueError:
            raise Unredirectable("invalid_client", "client_id: the client metadata document is not JSON") from None

    @staticmethod
    def _check_public(host: str, port: int) -> None:
        """Every address the name has is on the internet (a name resolved again at the fetch could differ:
        the operator's network, not this check, is the bound against a rebinding name)."""
        try:
            found = {info[4][0] for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)}
        except OSError:
            raise Unredirectable("invalid_client", f"client_id: the host {host[:100]} is not found") from None
        if not found or not all(ipaddress.ip_address(address.split("%")[0]).is_global for address in found):
            raise Unredirectable("invalid_client", f"client_id: {host[:100]} is on this office's own networks; "
                                 "the operator may name it in SWITCHBOARD_AGENT_METADATA_HOSTS")


def _document_client(redis: Redis, url: str, documents: Documents) -> dict:
    kept = redis.get(keys.mcp_client_key("url:" + digest(url)))
    if kept is not None:
        return json.loads(kept)
    document = documents.fetch(url)
    if not isinstance(document, dict) or document.get("client_id") != url:
        raise Unredirectable("invalid_client", "client_id: the client metadata document names another client_id")
    try:
        record = {"client_id": url} | _checked(document)
    except BadClient as bad:
        raise Unredirectable("invalid_client", f"the client metadata document: {bad.description}") from None
    redis.set(keys.mcp_client_key("url:" + digest(url)), json.dumps(record), ex=DOCUMENT_SECONDS)
    return record


def client(redis: Redis, client_id: str, documents: Documents | None = None) -> dict | None:
    """A registered client, or one whose client_id is its metadata document's URL (fetched with `documents`:
    Unredirectable if it is not usable)."""
    if client_id.startswith("https://") and documents is not None:
        return _document_client(redis, client_id, documents)
    if not client_id.startswith(CLIENT_PREFIX) or len(client_id) > 60:
        return None
    found = redis.get(keys.mcp_client_key(client_id))
    if found is None:
        return None
    redis.expire(keys.mcp_client_key(client_id), CLIENT_DAYS * 86400)  # (used: kept)
    return json.loads(found)


def check_ask(redis: Redis, args: dict, resources: tuple[str, ...], documents: Documents | None = None) -> Ask:
    """An authorization request (its query), or why not: Unredirectable when
    the client or its redirect URI is in doubt, an error shown on our page,
    never sent to a URI we cannot trust (RFC 6749 §4.1.2.1); else SentBack,
    for the client at its checked redirect URI."""
    registered = client(redis, args.get("client_id", ""), documents)
    if registered is None:
        raise Unredirectable("invalid_client", "client_id: no client of that id is registered here (or it was "
                              "forgotten after a long time unused): let the agent register again")
    redirect_uri = args.get("redirect_uri") or (registered["redirect_uris"][0]
                                                if len(registered["redirect_uris"]) == 1 else "")
    if not any(_same_redirect(uri, redirect_uri) for uri in registered["redirect_uris"]):
        raise Unredirectable("invalid_request", "redirect_uri: not one the client registered")
    if args.get("response_type") != "code":
        raise SentBack("unsupported_response_type", "response_type: only code", redirect_uri)
    if args.get("code_challenge_method") != "S256" or not _CHALLENGE.fullmatch(args.get("code_challenge", "")):
        raise SentBack("invalid_request", "PKCE is required: code_challenge (S256) and code_challenge_method=S256",
                       redirect_uri)
    resource = args.get("resource") or resources[0]
    if resource not in resources:
        raise SentBack("invalid_target", f"resource: this server is the authorization server of "
                       f"{', '.join(resources)} only", redirect_uri)
    return Ask(registered["client_id"], registered.get("client_name") or registered["client_id"], redirect_uri,
               args.get("state", "")[:500], args["code_challenge"], resource, args.get("scope", "")[:200])


class Unredirectable(Refused):
    """An authorization request's error that must not be sent to its redirect URI."""


class SentBack(Refused):
    """An authorization request's error for its client, at the redirect URI it registered (checked)."""

    def __init__(self, error: str, description: str, redirect_uri: str = ""):
        super().__init__(error, description)
        self.redirect_uri = redirect_uri


def hold_ask(redis: Redis, ask: Ask, person: str) -> str:
    """The ask kept while its person reads the consent page; the id the page's form posts back."""
    ask_id = secrets.token_urlsafe(24)
    redis.set(keys.mcp_ask_key(ask_id), json.dumps(ask.__dict__ | {"person": person}), ex=ASK_SECONDS)
    return ask_id


def take_ask(redis: Redis, ask_id: str, person: str) -> Ask | None:
    """The ask of this id, once, if it is this person's."""
    found = redis.getdel(keys.mcp_ask_key(ask_id[:64] or "-"))
    if found is None:
        return None
    record = json.loads(found)
    if record.pop("person") != person:
        return None
    return Ask(**record)


def issue_code(redis: Redis, ask: Ask, person: str, groups: tuple[str, ...]) -> str:
    code = secrets.token_urlsafe(32)
    redis.set(keys.mcp_code_key(digest(code)), json.dumps(ask.__dict__ | {"person": person, "groups": list(groups)}),
              ex=CODE_SECONDS)
    return code


def take_code(redis: Redis, form: dict) -> dict:
    """The authorization of this code, taken once, if every binding holds; else Refused(invalid_grant...)."""
    code, verifier = form.get("code", ""), form.get("code_verifier", "")
    found = redis.getdel(keys.mcp_code_key(digest(code))) if 0 < len(code) <= 200 else None
    if found is None:
        raise Refused("invalid_grant", "code: unknown, used already, or older than a minute")
    record = json.loads(found)
    if form.get("client_id") != record["client_id"]:
        raise Refused("invalid_grant", "client_id: not the client the code was given to")
    if form.get("redirect_uri", record["redirect_uri"]) != record["redirect_uri"]:
        raise Refused("invalid_grant", "redirect_uri: not the one the code was given to")
    if not _VERIFIER.fullmatch(verifier) or not hmac.compare_digest(challenge_of(verifier),
                                                                     record["code_challenge"]):
        raise Refused("invalid_grant", "code_verifier: missing, or not the one the code challenge was made from")
    if form.get("resource", record["resource"]) != record["resource"]:
        raise Refused("invalid_target", "resource: not the one the code was given for")
    return record


def challenge_of(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


# --- the refresh token: a login of the person's (identity/device_login.py's records), bound to its client ----
REFRESH_PREFIX = "sbr-"  # (a command-line login's is sbl-: neither grant takes the other's)


@dataclass(frozen=True)
class Grant:
    """What a token request gets: whose, their groups, the client and resource, and a new refresh token."""
    person: str
    groups: tuple[str, ...]
    client_id: str
    client_name: str
    resource: str
    refresh_token: str


def new_grant(redis: Redis, authorized: dict, days: int, may_hold: Callable[[str], bool]) -> Grant:
    """The refresh token of a code just taken (take_code), if its person `may_hold` one now."""
    _check(may_hold, authorized["person"])
    return _store(redis, Grant(authorized["person"], tuple(authorized["groups"]), authorized["client_id"],
                               authorized["client_name"], authorized["resource"], ""), days)


def holder(redis: Redis, form: dict) -> str | None:
    """Whose refresh token this is, looked at without spending it (None: no such token)."""
    token = form.get("refresh_token", "")
    if not token.startswith(REFRESH_PREFIX) or len(token) > 200:
        return None
    found = redis.hget(keys.cli_login_key(digest(token)), "person")
    return found.decode() if found else None


def refresh(redis: Redis, form: dict, days: int, may_hold: Callable[[str], bool]) -> Grant:
    """A refresh token traded for the next (the old one ends: a stolen one used after its agent's next
    refresh is refused, and so is the agent's, which signs in again), or Refused(invalid_grant)."""
    token = form.get("refresh_token", "")
    record: dict = {}
    if token.startswith(REFRESH_PREFIX) and len(token) <= 200:
        key = keys.cli_login_key(digest(token))
        with redis.pipeline(transaction=True) as pipe:  # taken once: two refreshes at once get one grant
            pipe.hgetall(key)
            pipe.delete(key)
            found, _ = pipe.execute()
        record = {k.decode(): v.decode() for k, v in found.items()}
    if not record.get("client_id"):
        raise Refused("invalid_grant", "this refresh token has ended (used already, revoked, or expired): sign in "
                      "again")
    redis.srem(keys.cli_logins_key(record["person"]), digest(token))
    if form.get("client_id") != record["client_id"]:
        raise Refused("invalid_grant", "client_id: not the client the refresh token was given to")
    if form.get("resource", record["resource"]) != record["resource"]:
        raise Refused("invalid_target", "resource: not the one the refresh token was given for")
    _check(may_hold, record["person"])
    return _store(redis, Grant(record["person"], tuple(json.loads(record["groups"])), record["client_id"],
                               record["client_name"], record["resource"], ""), days, float(record["created"]))


def _check(may_hold: Callable[[str], bool], person: str) -> None:
    if not may_hold(person):
        raise Refused("invalid_grant", "the identity provider no longer answers for you here (or gave no refresh "
                      "token at your sign-in): sign in again")


def _store(redis: Redis, grant: Grant, days: int, created: float | None = None) -> Grant:
    """Kept as a command-line login's record (so the person's page lists it, and revoking everything ends it)."""
    token = REFRESH_PREFIX + secrets.token_urlsafe(32)
    found, now = digest(token), time.time()
    record = {"person": grant.person, "groups": json.dumps(list(grant.groups)), "label": f"MCP: {grant.client_name}",
              "created": created or now, "used": now, "client_id": grant.client_id, "client_name": grant.client_name,
              "resource": grant.resource}
    with redis.pipeline(transaction=False) as pipe:
        pipe.hset(keys.cli_login_key(found), mapping=record)
        pipe.expire(keys.cli_login_key(found), days * 86400)
        pipe.sadd(keys.cli_logins_key(grant.person), found)
        pipe.execute()
    return Grant(**{**grant.__dict__, "refresh_token": token})
