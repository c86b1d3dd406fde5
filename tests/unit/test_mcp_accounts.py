"""identity/mcp_accounts.py: Switchboard as an OAuth MCP server's client,
per person, against a scripted server and authorization server (httpx's
MockTransport; fakeredis). The flow with real parts is
tests/integration/mcp_oauth/test_accounts.py."""
from __future__ import annotations

import base64
import hashlib
import json
from urllib.parse import parse_qs, urlsplit

import fakeredis
import httpx
import pytest
from pydantic import ValidationError

from catalog.mcp import McpServer
from identity import mcp_accounts
from identity.sealing import Sealer
from protocol import keys

MCP = "https://wiki.example/mcp"
ISSUER = "https://login.wiki.example"
ROOT = "https://switchboard.office"
BOB, CAROL = "signin:bob", "signin:carol"


class Scripted:
    """The wiki and its authorization server, as they answer; what was asked of them."""

    def __init__(self, **changes):
        self.prm = {"resource": MCP, "authorization_servers": [ISSUER], "scopes_supported": ["wiki"]}
        self.metadata = {"issuer": ISSUER, "authorization_endpoint": f"{ISSUER}/auth",
                         "token_endpoint": f"{ISSUER}/token", "registration_endpoint": f"{ISSUER}/reg",
                         "code_challenge_methods_supported": ["S256"],
                         "token_endpoint_auth_methods_supported": ["client_secret_basic"]}
        self.challenge = True  # the server's 401 names its metadata
        self.token_status, self.expires_in, self.asked = 200, 3600, []
        self.issued = 0
        for name, value in changes.items():
            setattr(self, name, value)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        url = str(request.url)
        self.asked.append((request.method, url, request.content.decode()))
        if url == MCP:
            headers = {"WWW-Authenticate": 'Bearer resource_metadata="https://wiki.example/prm"'} \
                if self.challenge else {}
            return httpx.Response(401, headers=headers)
        if url in ("https://wiki.example/prm", "https://wiki.example/.well-known/oauth-protected-resource/mcp"):
            return httpx.Response(200, json=self.prm)
        if url == f"{ISSUER}/.well-known/oauth-authorization-server":
            return httpx.Response(200, json=self.metadata)
        if url == f"{ISSUER}/reg":
            return httpx.Response(201, json={"client_id": "sw-1", "client_secret": "reg-secret",
                                             "token_endpoint_auth_method": "client_secret_basic"})
        if url == f"{ISSUER}/token":
            if self.token_status != 200:
                return httpx.Response(self.token_status, json={"error": "invalid_grant"})
            self.issued += 1
            return httpx.Response(200, json={"access_token": f"at-{self.issued}", "token_type": "Bearer",
                                             "refresh_token": f"rt-{self.issued}", "expires_in": self.expires_in})
        return httpx.Response(404)

    def forms(self, url: str) -> list[dict]:
        return [{k: v[0] for k, v in parse_qs(body).items()} for method, asked, body in self.asked
                if asked == url and method == "POST"]


@pytest.fixture
def redis():
    return fakeredis.FakeRedis()


SEALER = Sealer(b"office-secret")
WIKI = McpServer(name="wiki", url=MCP, auth="oauth")


def http(scripted: Scripted) -> httpx.Client:
    return httpx.Client(transport=httpx.MockTransport(scripted))


def connected(redis, scripted: Scripted, person: str = BOB, server: McpServer = WIKI) -> str:
    """The person connects; the code's answer as the authorization server sends it."""
    url = mcp_accounts.begin(redis, SEALER, server, person, ROOT, http(scripted))
    state = parse_qs(urlsplit(url).query)["state"][0]
    return mcp_accounts.complete(redis, SEALER, {server.name: server}, person, state, "code-1", ISSUER,
                                 http(scripted))


# --- discovery ----------------------------------------------------------------------------------------------
def test_discovery_follows_the_401_then_the_authorization_servers_metadata():
    found = mcp_accounts.discover(WIKI, http(Scripted()))
    assert (found.resource, found.issuer, found.token_endpoint) == (MCP, ISSUER, f"{ISSUER}/token")


def test_discovery_falls_back_to_the_well_known_place_without_a_challenge():
    assert mcp_accounts.discover(WIKI, http(Scripted(challenge=False))).issuer == ISSUER


@pytest.mark.parametrize("change, said", [
    ({"prm": {"resource": "https://other.example/mcp", "authorization_servers": [ISSUER]}}, "another resource"),
    ({"prm": {"resource": MCP, "authorization_servers": []}}, "no authorization server"),
    ({"metadata": {"issuer": ISSUER, "authorization_endpoint": f"{ISSUER}/auth", "token_endpoint": f"{ISSUER}/t",
                   "code_challenge_methods_supported": ["plain"]}}, "S256"),
    ({"metadata": {"issuer": "https://evil.example", "authorization_endpoint": f"{ISSUER}/auth",
                   "token_endpoint": f"{ISSUER}/t", "code_challenge_methods_supported": ["S256"]}}, "another issuer"),
])
def test_discovery_refuses_what_mcp_does_not_allow(change, said):
    with pytest.raises(mcp_accounts.ConnectFailed, match=said):
        mcp_accounts.discover(WIKI, http(Scripted(**change)))


# --- connecting -------------------------------------------------------------------------------------------
def test_connecting_registers_once_and_asks_with_pkce_and_the_resource(redis):
    scripted = Scripted()
    first = mcp_accounts.begin(redis, SEALER, WIKI, BOB, ROOT, http(scripted))
    mcp_accounts.begin(redis, SEALER, WIKI, CAROL, ROOT, http(scripted))
    assert sum(1 for _, url, _ in scripted.asked if url == f"{ISSUER}/reg") == 1  # (one registration for all)
    asked = {k: v[0] for k, v in parse_qs(urlsplit(first).query).items()}
    assert first.startswith(f"{ISSUER}/auth?")
    assert asked["client_id"] == "sw-1" and asked["redirect_uri"] == ROOT + "/me/mcp/callback"
    assert asked["code_challenge_method"] == "S256" and len(asked["code_challenge"]) == 43
    assert asked["resource"] == MCP and asked["scope"] == "wiki" and asked["response_type"] == "code"
    # the registration's secret is sealed in Redis
    assert b"reg-secret" not in redis.get(keys.mcp_upstream_client_key("wiki"))


def test_the_operators_client_is_used_where_it_is_named(redis, monkeypatch):
    monkeypatch.setenv("WIKI_OAUTH_SECRET", "operator-secret")
    server = McpServer(name="wiki", url=MCP, auth="oauth", oauth_client_id="switchboard",
                       oauth_client_secret_env="WIKI_OAUTH_SECRET", oauth_scopes=["read"])
    scripted = Scripted()
    url = mcp_accounts.begin(redis, SEALER, server, BOB, ROOT, http(scripted))
    assert not any(asked == f"{ISSUER}/reg" for _, asked, _ in scripted.asked)
    assert parse_qs(urlsplit(url).query)["client_id"] == ["switchboard"]
    assert parse_qs(urlsplit(url).query)["scope"] == ["read"]


def test_the_code_is_traded_with_its_verifier_and_the_tokens_are_sealed(redis):
    scripted = Scripted()
    url = mcp_accounts.begin(redis, SEALER, WIKI, BOB, ROOT, http(scripted))
    asked = parse_qs(urlsplit(url).query)
    mcp_accounts.complete(redis, SEALER, {"wiki": WIKI}, BOB, asked["state"][0], "code-1", ISSUER, http(scripted))
    [form] = scripted.forms(f"{ISSUER}/token")
    verifier = form["code_verifier"]
    assert base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode() == \
        asked["code_challenge"][0]
    assert form["resource"] == MCP and form["code"] == "code-1" and form["redirect_uri"] == ROOT + "/me/mcp/callback"
    record = redis.hgetall(keys.mcp_account_key("wiki", BOB))
    assert b"at-1" not in b"".join(record.values()) and b"rt-1" not in b"".join(record.values())
    assert mcp_accounts.access_token(redis, SEALER, WIKI, BOB) == "at-1"
    assert mcp_accounts.of_person(redis, BOB).keys() == {"wiki"}


@pytest.mark.parametrize("attack", ["another person", "used twice", "forged", "another issuer"])
def test_a_connection_completes_only_for_whoever_started_it(redis, attack):
    scripted = Scripted()
    url = mcp_accounts.begin(redis, SEALER, WIKI, BOB, ROOT, http(scripted))
    state = parse_qs(urlsplit(url).query)["state"][0]
    person, iss = BOB, ISSUER
    if attack == "another person":
        person = CAROL  # carol's browser sent to bob's callback (a login CSRF)
    elif attack == "used twice":
        mcp_accounts.complete(redis, SEALER, {"wiki": WIKI}, BOB, state, "code-1", ISSUER, http(scripted))
    elif attack == "forged":
        state = "made-up-state"
    else:
        iss = "https://evil.example"  # (a mix-up: the code came from another authorization server)
    with pytest.raises(mcp_accounts.ConnectFailed):
        mcp_accounts.complete(redis, SEALER, {"wiki": WIKI}, person, state, "code-1", iss, http(scripted))
    if attack != "used twice":
        assert not redis.exists(keys.mcp_account_key("wiki", person))


# --- using and ending it ---------------------------------------------------------------------------------
def test_a_record_moved_to_another_person_or_server_does_not_open(redis):
    connected(redis, Scripted())
    redis.copy(keys.mcp_account_key("wiki", BOB), keys.mcp_account_key("wiki", CAROL))
    redis.copy(keys.mcp_account_key("wiki", BOB), keys.mcp_account_key("other", BOB))
    with pytest.raises(mcp_accounts.NotConnected):
        mcp_accounts.access_token(redis, SEALER, WIKI, CAROL)
    with pytest.raises(mcp_accounts.NotConnected):
        mcp_accounts.access_token(redis, SEALER, WIKI.model_copy(update={"name": "other"}), BOB)


def test_a_token_in_its_last_third_is_refreshed_with_the_resource(redis):
    scripted = Scripted(expires_in=300)
    connected(redis, scripted)
    issued = float(redis.hget(keys.mcp_account_key("wiki", BOB), "expires")) - 300
    assert mcp_accounts.access_token(redis, SEALER, WIKI, BOB, now=issued + 150, http=http(scripted)) == "at-1"
    assert mcp_accounts.access_token(redis, SEALER, WIKI, BOB, now=issued + 250, http=http(scripted)) == "at-2"
    refresh = scripted.forms(f"{ISSUER}/token")[-1]
    assert refresh == {"grant_type": "refresh_token", "refresh_token": "rt-1", "resource": MCP}
    # the rotated refresh token is the one used next
    mcp_accounts.access_token(redis, SEALER, WIKI, BOB, now=issued + 600, http=http(scripted))
    assert scripted.forms(f"{ISSUER}/token")[-1]["refresh_token"] == "rt-2"


def test_a_refresh_the_server_refuses_drops_the_account(redis):
    scripted = Scripted(expires_in=300)
    connected(redis, scripted)
    scripted.token_status = 400
    with pytest.raises(mcp_accounts.NotConnected):
        mcp_accounts.access_token(redis, SEALER, WIKI, BOB, now=9e9, http=http(scripted))
    assert not redis.exists(keys.mcp_account_key("wiki", BOB)) and mcp_accounts.of_person(redis, BOB) == {}


def test_an_unreachable_authorization_server_leaves_a_live_token_in_use(redis):
    scripted = Scripted(expires_in=300)
    connected(redis, scripted)
    issued = float(redis.hget(keys.mcp_account_key("wiki", BOB), "expires")) - 300
    scripted.token_status = 503
    assert mcp_accounts.access_token(redis, SEALER, WIKI, BOB, now=issued + 250, http=http(scripted)) == "at-1"
    with pytest.raises(mcp_accounts.NotConnected):  # (once it ended, it is not sent)
        mcp_accounts.access_token(redis, SEALER, WIKI, BOB, now=issued + 400, http=http(scripted))


def test_drop_all_forgets_every_account_and_the_consoles_list(redis):
    connected(redis, Scripted())
    connected(redis, Scripted(), CAROL)
    assert [a["person"] for a in mcp_accounts.people_of(redis, ["wiki"])["wiki"]] == ["bob", "carol"]
    assert mcp_accounts.drop_all(redis, BOB) == 1
    assert [a["person"] for a in mcp_accounts.people_of(redis, ["wiki"])["wiki"]] == ["carol"]
    with pytest.raises(mcp_accounts.NotConnected):
        mcp_accounts.access_token(redis, SEALER, WIKI, BOB)


# --- the registry -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("table, said", [
    ({"command": "wiki-mcp", "auth": "oauth"}, "remote server"),
    ({"url": MCP, "auth": "oauth", "headers_env": {"Authorization": "WIKI_TOKEN"}}, "Authorization"),
    ({"url": MCP, "oauth_client_id": "x"}, 'auth = "oauth"'),
    ({"url": MCP, "auth": "oauth", "oauth_client_secret_env": "S"}, "oauth_client_id"),
    ({"url": MCP, "auth": "basic"}, "auth"),
])
def test_the_registry_refuses_an_oauth_server_it_cannot_run(table, said):
    with pytest.raises(ValidationError, match=said):
        McpServer(name="wiki", **table)


def test_each_person_has_a_session_of_their_own_on_an_oauth_server():
    assert WIKI.session_of(BOB, {}) == (BOB, {}) and WIKI.session_of(CAROL, {})[0] == CAROL
    assert json.dumps(WIKI.request_headers()) == "{}"  # (no shared credential at all)
