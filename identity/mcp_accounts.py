"""Each person's own account on an OAuth-protected MCP server: Switchboard
as that server's OAuth client, once per person (the MCP authorization spec,
2025-11-25, from the client's side).

A server the registry marks `auth = "oauth"` acts as the person who calls
it. A person connects it once, from /me:

1. Discovery: the server's 401 names its protected resource metadata
   (RFC 9728; else the well-known URLs beside the server), which names its
   authorization server, whose metadata (RFC 8414, else OpenID discovery)
   names its endpoints. An authorization server that does not offer PKCE
   with S256 is refused (the spec's rule).
2. The client: the one the operator registered there (`oauth_client_id`,
   its secret in `oauth_client_secret_env`), else Switchboard registers
   itself (RFC 7591) once per server and keeps the registration (its secret
   sealed).
3. Authorization code with PKCE (S256) and the `resource` parameter
   (RFC 8707), the state bound to the person who started it; the tokens
   come back to /me/mcp/callback.

A person here is the name their requests carry (a signed-in person's
`identity.keys.signed_in_name`): only people who signed in connect an
account, and a key of the keys file never reaches one.

The tokens are sealed under the office secret (identity/sealing.py), bound
to the person and the server (a record moved to another person or server
does not open), refreshed by the MCP pool before they end (one process at
a time), and dropped when the person disconnects, is suspended, forgotten
or has everything revoked, or when the server refuses the refresh. They
are never sent anywhere but to that server: not to a client, a log, a
trace, a record, nor over Redis unsealed.
"""
from __future__ import annotations

import base64
import hashlib
import json
import logging
import secrets
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator
from urllib.parse import urlencode, urlsplit

from redis import Redis

from catalog.mcp import McpServer
from catalog.secrets import secret_from_env
from identity.keys import SIGNED_IN
from identity.sealing import SealedContentInvalid, Sealer
from protocol import keys

log = logging.getLogger(__name__)

CONNECT_SECONDS = 600  # a connection started on /me must come back within this
CALLBACK_PATH = "/me/mcp/callback"
REFRESH_MARGIN_SECONDS = 60.0  # a token is refreshed this long before it ends (a third of its life, if shorter)
REFRESH_LOCK_SECONDS = 15
HTTP_TIMEOUT_SECONDS = 10.0
MOST_METADATA_BYTES = 64 * 1024
CLIENT_NAME = "Switchboard"


class NotConnected(Exception):
    """The person has no account on the server here (or it ended): they connect it on /me."""


class ConnectFailed(Exception):
    """Discovery, registration or the token exchange failed; the message says why (never a secret)."""


class Refused(ConnectFailed):
    """The authorization server refused the grant (a code used or ended, a refresh token revoked)."""


# --- what the server and its authorization server say ---------------------------------------------------
@dataclass(frozen=True)
class Discovered:
    resource: str
    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    registration_endpoint: str | None
    revocation_endpoint: str | None
    scopes: tuple[str, ...]
    auth_methods: tuple[str, ...]


@contextmanager
def _client(http=None) -> Iterator:
    """`http` as given (a test's), else a client of our own, closed after."""
    if http is not None:
        yield http
        return
    import httpx  # (loaded only when a person connects a server, or a token is refreshed)
    with httpx.Client(timeout=HTTP_TIMEOUT_SECONDS, follow_redirects=False, trust_env=True) as own:
        yield own


def _json(answer, what: str, ok: tuple[int, ...] = (200,)) -> dict:
    if answer.status_code not in ok:
        raise ConnectFailed(f"{what} answered {answer.status_code}")
    if len(answer.content) > MOST_METADATA_BYTES:
        raise ConnectFailed(f"{what} is larger than {MOST_METADATA_BYTES} bytes")
    try:
        value = answer.json()
    except ValueError:
        raise ConnectFailed(f"{what} is not JSON") from None
    if not isinstance(value, dict):
        raise ConnectFailed(f"{what} is not a JSON object")
    return value


def _resource_metadata_url(http, url: str) -> list[str]:
    """Where the server says its metadata is (its 401's WWW-Authenticate), then the well-known places."""
    found = []
    try:
        answer = http.post(url, json={"jsonrpc": "2.0", "id": 0, "method": "ping"},
                           headers={"Accept": "application/json, text/event-stream"})
        challenge = answer.headers.get("www-authenticate", "") if answer.status_code == 401 else ""
        if 'resource_metadata="' in challenge:
            found.append(challenge.split('resource_metadata="', 1)[1].split('"', 1)[0])
    except Exception as error:  # noqa: BLE001 - a server that cannot be reached is said so below
        raise ConnectFailed(f"the MCP server could not be reached ({type(error).__name__})") from None
    parts = urlsplit(url)
    origin, path = f"{parts.scheme}://{parts.netloc}", parts.path.rstrip("/")
    found += [f"{origin}/.well-known/oauth-protected-resource{path}", f"{origin}/.well-known/oauth-protected-resource"]
    return list(dict.fromkeys(found))


def _authorization_metadata_urls(issuer: str) -> list[str]:
    parts = urlsplit(issuer)
    origin, path = f"{parts.scheme}://{parts.netloc}", parts.path.rstrip("/")
    if not path:
        return [f"{origin}/.well-known/oauth-authorization-server", f"{origin}/.well-known/openid-configuration"]
    return [f"{origin}/.well-known/oauth-authorization-server{path}", f"{origin}/.well-known/openid-configuration{path}",
            f"{origin}{path}/.well-known/openid-configuration"]


def discover(server: McpServer, http=None) -> Discovered:
    """The server's resource and its authorization server's endpoints, or ConnectFailed."""
    with _client(http) as http:
        metadata = _first_found(http, _resource_metadata_url(http, server.url),
                                "the server's protected resource metadata")
        if metadata is None:
            raise ConnectFailed("the server publishes no protected resource metadata (RFC 9728): is it an OAuth "
                                "server?")
        resource = metadata.get("resource")
        if not isinstance(resource, str) or not _covers(resource, server.url):
            raise ConnectFailed(f"the server's metadata names another resource ({str(resource)[:100]!r})")
        issuers = metadata.get("authorization_servers")
        if not isinstance(issuers, list) or not issuers or not isinstance(issuers[0], str):
            raise ConnectFailed("the server's metadata names no authorization server")
        issuer = issuers[0]
        found = _first_found(http, _authorization_metadata_urls(issuer), "the authorization server's metadata")
        if found is None:
            raise ConnectFailed(f"the authorization server {issuer[:100]} publishes no metadata")
        if found.get("issuer") not in (issuer, issuer.rstrip("/")):
            raise ConnectFailed("the authorization server's metadata names another issuer")
        if "S256" not in (found.get("code_challenge_methods_supported") or []):
            raise ConnectFailed("the authorization server does not offer PKCE with S256, which MCP requires")
        for field in ("authorization_endpoint", "token_endpoint"):
            if not _http_url(found.get(field)):
                raise ConnectFailed(f"the authorization server's metadata has no {field}")
        scopes = metadata.get("scopes_supported") or []
        return Discovered(resource, issuer, found["authorization_endpoint"], found["token_endpoint"],
                          found.get("registration_endpoint") if _http_url(found.get("registration_endpoint")) else None,
                          found.get("revocation_endpoint") if _http_url(found.get("revocation_endpoint")) else None,
                          tuple(s for s in scopes if isinstance(s, str)),
                          tuple(found.get("token_endpoint_auth_methods_supported") or ("client_secret_basic",)))


def _first_found(http, urls: list[str], what: str) -> dict | None:
    """The first of the places that answers 200 (its JSON object, or ConnectFailed), else None."""
    for url in urls:
        try:
            answer = http.get(url, headers={"Accept": "application/json"})
        except Exception:  # noqa: BLE001 - the next place is tried
            continue
        if answer.status_code == 200:
            return _json(answer, what)
    return None


def _http_url(value) -> bool:
    return isinstance(value, str) and value.startswith(("https://", "http://")) and len(value) < 2000


def _covers(resource: str, url: str) -> bool:
    """The resource is the server's URL or a URL above it (RFC 9728 §3.3 and the MCP spec's canonical URI)."""
    resource, url = resource.rstrip("/"), url.rstrip("/")
    return url == resource or url.startswith(resource + "/")


# --- Switchboard's client at the server's authorization server --------------------------------------------
@dataclass(frozen=True)
class Registration:
    client_id: str
    client_secret: str  # "" for a public client
    auth_method: str  # client_secret_basic, client_secret_post or none
    redirect_uri: str
    discovered: Discovered

    def authenticate(self, form: dict) -> tuple[dict, tuple[str, str] | None]:
        """The token request's form and basic auth, as the client authenticates."""
        if self.auth_method == "client_secret_basic":
            return form, (self.client_id, self.client_secret)
        if self.auth_method == "client_secret_post":
            return form | {"client_id": self.client_id, "client_secret": self.client_secret}, None
        return form | {"client_id": self.client_id}, None


def registration(redis: Redis, sealer: Sealer, server: McpServer, redirect_uri: str, http=None,
                 fresh: bool = False) -> Registration:
    """This server's client at the server's authorization server: the operator's, or one registered once
    (again when the public URL changed, or `fresh`)."""
    if not fresh:
        kept = _kept_registration(redis, sealer, server.name)
        if kept is not None and kept.redirect_uri == redirect_uri:
            return kept
    discovered = discover(server, http)
    if server.oauth_client_id:
        secret = secret_from_env(server.oauth_client_secret_env) if server.oauth_client_secret_env else ""
        method = "none" if not secret else ("client_secret_basic" if "client_secret_basic" in discovered.auth_methods
                                            else "client_secret_post")
        found = Registration(server.oauth_client_id, secret or "", method, redirect_uri, discovered)
    else:
        found = _register(server, discovered, redirect_uri, http)
    _keep_registration(redis, sealer, server.name, found)
    return found


def _register(server: McpServer, discovered: Discovered, redirect_uri: str, http=None) -> Registration:
    if discovered.registration_endpoint is None:
        raise ConnectFailed("the authorization server takes no registrations (RFC 7591): the operator registers a "
                            f'client there and names it in the registry (oauth_client_id of "{server.name}")')
    method = next((m for m in ("client_secret_basic", "client_secret_post", "none") if m in discovered.auth_methods),
                  "client_secret_basic")
    metadata = {"client_name": CLIENT_NAME, "redirect_uris": [redirect_uri], "response_types": ["code"],
                "grant_types": ["authorization_code", "refresh_token"], "token_endpoint_auth_method": method,
                "application_type": "web"}  # (no "scope": a resource's scopes are asked for at authorization)
    try:
        with _client(http) as client:
            answer = client.post(discovered.registration_endpoint, json=metadata)
    except Exception as error:  # noqa: BLE001
        raise ConnectFailed(f"registering at the authorization server failed ({type(error).__name__})") from None
    if answer.status_code not in (200, 201):
        said = _oauth_error(answer)
        raise ConnectFailed(f"the authorization server refused the registration ({said})")
    body = _json(answer, "the registration", (200, 201))
    if not isinstance(body.get("client_id"), str):
        raise ConnectFailed("the registration gave no client_id")
    return Registration(body["client_id"], str(body.get("client_secret") or ""),
                        str(body.get("token_endpoint_auth_method") or method), redirect_uri, discovered)


def _oauth_error(answer) -> str:
    try:
        body = answer.json()
        return f'{str(body.get("error"))[:60]}: {str(body.get("error_description", ""))[:200]}'
    except Exception:  # noqa: BLE001
        return f"status {answer.status_code}"


def _keep_registration(redis: Redis, sealer: Sealer, server: str, found: Registration) -> None:
    value = {"client_id": found.client_id, "client_secret": found.client_secret, "auth_method": found.auth_method,
             "redirect_uri": found.redirect_uri, "discovered": found.discovered.__dict__}
    redis.set(keys.mcp_upstream_client_key(server), sealer.seal("mcp client", server, json.dumps(value)))


def _kept_registration(redis: Redis, sealer: Sealer, server: str) -> Registration | None:
    blob = redis.get(keys.mcp_upstream_client_key(server))
    if blob is None:
        return None
    try:
        value = json.loads(sealer.open("mcp client", server, blob.decode(), "registration"))
    except (SealedContentInvalid, ValueError):
        return None
    discovered = value.pop("discovered")
    discovered = Discovered(**{k: tuple(v) if isinstance(v, list) else v for k, v in discovered.items()})
    return Registration(**value, discovered=discovered)


# --- connecting -------------------------------------------------------------------------------------------
def begin(redis: Redis, sealer: Sealer, server: McpServer, person: str, root: str, http=None) -> str:
    """The URL of the server's authorization server that the person's browser goes to, or ConnectFailed."""
    found = registration(redis, sealer, server, root + CALLBACK_PATH, http)
    state, verifier = secrets.token_urlsafe(24), secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    redis.set(keys.mcp_connect_key(state), sealer.seal("mcp connect", person, json.dumps(
        {"server": server.name, "verifier": verifier})), ex=CONNECT_SECONDS)
    query = {"response_type": "code", "client_id": found.client_id, "redirect_uri": found.redirect_uri,
             "state": state, "code_challenge": challenge, "code_challenge_method": "S256",
             "resource": found.discovered.resource}
    scopes = server.oauth_scopes or found.discovered.scopes
    if scopes:
        query["scope"] = " ".join(scopes)
    endpoint = found.discovered.authorization_endpoint
    return endpoint + ("&" if "?" in endpoint else "?") + urlencode(query)


def abandon(redis: Redis, state: str) -> None:
    """A connection the authorization server refused: its state forgotten."""
    redis.delete(keys.mcp_connect_key(state[:100]))


def complete(redis: Redis, sealer: Sealer, servers: dict[str, McpServer], person: str, state: str, code: str,
             iss: str | None = None, http=None) -> str:
    """The person's tokens for the server their connection was for, kept; its name. ConnectFailed if the
    state is not theirs (or too old), the answer names another issuer (RFC 9207: a mix-up), or the
    server's authorization server refuses the code."""
    blob = redis.getdel(keys.mcp_connect_key(state[:100])) if state else None
    try:
        started = json.loads(sealer.open("mcp connect", person, blob.decode(), "state")) if blob else None
    except SealedContentInvalid:
        started = None  # (another person's: they connect their own)
    if started is None or started.get("server") not in servers:
        raise ConnectFailed("this connection was not started by you here, or it waited too long: connect again")
    server = servers[started["server"]]
    found = _kept_registration(redis, sealer, server.name)
    if found is None:
        raise ConnectFailed("the server's registration here ended meanwhile: connect again")
    if iss is not None and iss.rstrip("/") != found.discovered.issuer.rstrip("/"):
        raise ConnectFailed("the answer came from another authorization server than the server's: connect again")
    form = {"grant_type": "authorization_code", "code": code, "redirect_uri": found.redirect_uri,
            "code_verifier": started["verifier"], "resource": found.discovered.resource}
    tokens = _token_request(found, form, http)
    _keep_tokens(redis, sealer, server.name, person, tokens, time.time())
    return server.name


def _token_request(found: Registration, form: dict, http=None) -> dict:
    form, basic = found.authenticate(form)
    try:
        with _client(http) as client:
            answer = client.post(found.discovered.token_endpoint, data=form, auth=basic,
                                 headers={"Accept": "application/json"})
    except Exception as error:  # noqa: BLE001
        raise ConnectFailed(f"the authorization server could not be reached ({type(error).__name__})") from None
    if answer.status_code != 200:
        raise Refused(_oauth_error(answer)) if answer.status_code in (400, 401) else \
            ConnectFailed(f"the authorization server answered {answer.status_code}")
    body = _json(answer, "the token response")
    if not isinstance(body.get("access_token"), str) or str(body.get("token_type", "")).lower() != "bearer":
        raise ConnectFailed("the token response carries no bearer access token")
    return body


def _keep_tokens(redis: Redis, sealer: Sealer, server: str, person: str, tokens: dict, now: float,
                 refresh_token: str = "") -> dict:
    life = tokens.get("expires_in")
    kept = {"access_token": tokens["access_token"], "refresh_token": tokens.get("refresh_token") or refresh_token,
            "issued": now, "expires": now + float(life) if isinstance(life, (int, float)) and life > 0 else 0.0}
    with redis.pipeline(transaction=True) as pipe:
        pipe.hset(keys.mcp_account_key(server, person), mapping={
            "sealed": sealer.seal(_kind(server), person, json.dumps(kept)), "expires": kept["expires"]})
        pipe.hsetnx(keys.mcp_account_key(server, person), "connected", now)
        pipe.zadd(keys.mcp_accounts_key(server), {person: now})
        pipe.sadd(keys.mcp_person_accounts_key(person), server)
        pipe.execute()
    return kept


def _kind(server: str) -> str:
    return f"mcp account {server}"


# --- using it -----------------------------------------------------------------------------------------------
def access_token(redis: Redis, sealer: Sealer, server: McpServer, person: str, now: float | None = None,
                 http=None) -> str:
    """The person's access token on the server, refreshed first if it ends soon; NotConnected if they have
    none (or the server refused its refresh: they connect again)."""
    now = now or time.time()
    kept = _tokens(redis, sealer, server.name, person)
    if kept is None:
        raise NotConnected(server.name)
    if not _ends_soon(kept, now):
        return kept["access_token"]
    lock = keys.mcp_account_lock_key(server.name, person)
    if not redis.set(lock, "1", nx=True, ex=REFRESH_LOCK_SECONDS):  # another process refreshes it: wait for it
        deadline = time.monotonic() + REFRESH_LOCK_SECONDS
        while redis.exists(lock) and time.monotonic() < deadline:
            time.sleep(0.05)
        kept = _tokens(redis, sealer, server.name, person)
        if kept is None:
            raise NotConnected(server.name)
        return kept["access_token"]
    try:
        return _refreshed(redis, sealer, server, person, kept, now, http)
    finally:
        redis.delete(lock)


def _ends_soon(kept: dict, now: float) -> bool:
    if not kept["expires"]:
        return False
    margin = min(REFRESH_MARGIN_SECONDS, (kept["expires"] - kept["issued"]) / 3)
    return now >= kept["expires"] - margin


def _refreshed(redis: Redis, sealer: Sealer, server: McpServer, person: str, kept: dict, now: float,
               http=None) -> str:
    found = _kept_registration(redis, sealer, server.name)
    if not kept["refresh_token"] or found is None:
        if now < kept["expires"]:
            return kept["access_token"]
        drop(redis, server.name, person)
        raise NotConnected(server.name)
    form = {"grant_type": "refresh_token", "refresh_token": kept["refresh_token"],
            "resource": found.discovered.resource}
    try:
        tokens = _token_request(found, form, http)
    except Refused as refused:
        log.warning('MCP server "%s": its authorization server refused %s\'s refresh (%s); they connect again',
                    server.name, person, str(refused)[:200])
        drop(redis, server.name, person)
        raise NotConnected(server.name) from None
    except ConnectFailed as failed:
        if now < kept["expires"]:
            return kept["access_token"]  # (tried again at the next call)
        raise NotConnected(server.name) from failed
    if _tokens(redis, sealer, server.name, person) is None:
        raise NotConnected(server.name)  # (disconnected while it was refreshed)
    return _keep_tokens(redis, sealer, server.name, person, tokens, now, kept["refresh_token"])["access_token"]


def _tokens(redis: Redis, sealer: Sealer, server: str, person: str) -> dict | None:
    blob = redis.hget(keys.mcp_account_key(server, person), "sealed")
    if blob is None:
        return None
    try:
        return json.loads(sealer.open(_kind(server), person, blob.decode(), "account"))
    except (SealedContentInvalid, ValueError):
        return None


# --- ending it ----------------------------------------------------------------------------------------------
def drop(redis: Redis, server: str, person: str) -> bool:
    """Their tokens on the server, forgotten; whether there were any."""
    with redis.pipeline(transaction=True) as pipe:
        pipe.delete(keys.mcp_account_key(server, person))
        pipe.zrem(keys.mcp_accounts_key(server), person)
        pipe.srem(keys.mcp_person_accounts_key(person), server)
        return bool(pipe.execute()[0])


def drop_all(redis: Redis, person: str) -> int:
    """Every account of theirs, forgotten; how many there were."""
    servers = [found.decode() for found in redis.smembers(keys.mcp_person_accounts_key(person))]
    return sum(drop(redis, server, person) for server in servers)


def revoke_at_server(redis: Redis, sealer: Sealer, server: str, person: str, http=None) -> None:
    """Tell the server's authorization server the refresh token is no longer wanted (RFC 7009), if it has a
    revocation endpoint; a failure only leaves it to end on its own."""
    kept, found = _tokens(redis, sealer, server, person), _kept_registration(redis, sealer, server)
    if kept is None or found is None or not found.discovered.revocation_endpoint or not kept["refresh_token"]:
        return
    form, basic = found.authenticate({"token": kept["refresh_token"], "token_type_hint": "refresh_token"})
    try:
        with _client(http) as client:
            client.post(found.discovered.revocation_endpoint, data=form, auth=basic)
    except Exception as error:  # noqa: BLE001
        log.info('MCP server "%s": revoking a token failed (%s)', server, type(error).__name__)


# --- what is shown ------------------------------------------------------------------------------------------
def of_person(redis: Redis, person: str) -> dict[str, float]:
    """The servers they connected: name -> when."""
    servers = sorted(found.decode() for found in redis.smembers(keys.mcp_person_accounts_key(person)))
    with redis.pipeline(transaction=False) as pipe:
        for server in servers:
            pipe.hget(keys.mcp_account_key(server, person), "connected")
        return {server: float(when) for server, when in zip(servers, pipe.execute()) if when is not None}


def people_of(redis: Redis, servers) -> dict[str, list[dict]]:
    """For the console: per server, who connected it and when their tokens were last renewed."""
    with redis.pipeline(transaction=False) as pipe:
        for server in servers:
            pipe.zrange(keys.mcp_accounts_key(server), 0, -1, withscores=True)
        return {server: [{"person": person.decode().removeprefix(SIGNED_IN), "renewed": when}
                         for person, when in found] for server, found in zip(servers, pipe.execute())}
