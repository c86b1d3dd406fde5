"""Issue 72's authorization server for MCP agents, attacked over HTTP: a
code only ever reaches the agent's registered redirect, only with its
person's consent given on our own page, and an agent's token opens the MCP
gateway only; no code or token reaches a log or a record."""
from __future__ import annotations

import json
import secrets
from urllib.parse import urlencode

import httpx
import pytest

from identity.mcp_oauth import challenge_of
from protocol.keys import AUDIT_LOG, REQUEST_LOG
from tests.integration.signin_stack import Browsing
from tests.integration.mcp_oauth.test_agents import REDIRECT


def register(base: str, uris=(REDIRECT,)) -> str:
    answer = httpx.post(f"{base}/oauth/register", json={"redirect_uris": list(uris), "client_name": "agent"},
                        timeout=30)
    assert answer.status_code == 201, answer.text
    return answer.json()["client_id"]


def authorize_query(base: str, client_id: str, verifier: str, **changes) -> str:
    return "/oauth/authorize?" + urlencode({
        "response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT, "state": "st",
        "code_challenge": challenge_of(verifier), "code_challenge_method": "S256", "resource": f"{base}/mcp"} | changes)


def consent(person: Browsing, query: str) -> str:
    page = person.request("GET", query)
    assert page.status_code == 200, page.text[:300]
    return page.text.split('name="ask" value="', 1)[1].split('"', 1)[0]


@pytest.mark.parametrize("redirect", ["https://evil.example/cb", "http://evil.example/cb",
                                      "http://127.0.0.1:9/other", "http://127.0.0.1:9@evil.example/callback"])
def test_a_redirect_the_client_did_not_register_is_never_sent_a_code_or_an_error(oauth_office, clean_redis,
                                                                                  redirect):
    base = oauth_office["base"]
    bob, client_id = Browsing(base, "bob"), register(base)
    page = bob.request("GET", authorize_query(base, client_id, secrets.token_urlsafe(40), redirect_uri=redirect))
    assert page.status_code == 400 and "location" not in page.headers and "redirect_uri" in page.text


def test_a_forged_client_or_no_pkce_gets_no_consent_page(oauth_office, clean_redis):
    base = oauth_office["base"]
    bob, client_id, verifier = Browsing(base, "bob"), register(base), secrets.token_urlsafe(40)
    forged = bob.request("GET", authorize_query(base, "sbc-forged", verifier))
    assert forged.status_code == 400 and 'name="ask"' not in forged.text
    for changes in ({"code_challenge_method": "plain"}, {"code_challenge": ""}, {"resource": "https://evil.example/mcp"}):
        back = bob.request("GET", authorize_query(base, client_id, verifier, **changes))
        assert back.status_code == 302 and back.headers["location"].startswith(REDIRECT + "?error="), back.headers
        assert "code=" not in back.headers["location"]


def test_signed_out_a_browser_is_sent_to_sign_in_first(oauth_office, clean_redis):
    base, client_id = oauth_office["base"], register(oauth_office["base"])
    query = authorize_query(base, client_id, secrets.token_urlsafe(40))
    answer = httpx.get(base + query, headers={"Accept": "text/html"}, timeout=30)
    assert answer.status_code == 302 and answer.headers["location"].startswith("/login?next=/oauth/authorize"), \
        answer.headers
    assert httpx.get(base + query, timeout=30).status_code == 401  # (not a browser: refused, nothing asked)


def test_consent_is_given_on_our_page_by_its_person_only(oauth_office, clean_redis):
    base = oauth_office["base"]
    bob, carol, client_id = Browsing(base, "bob"), Browsing(base, "carol"), register(base)
    ask = consent(bob, authorize_query(base, client_id, secrets.token_urlsafe(40)))
    for origin in ("https://evil.example", "null"):  # another site's form posting bob's answer
        forged = bob.request("POST", "/oauth/authorize", data={"ask": ask, "decision": "approve"},
                             headers={"Origin": origin})
        assert forged.status_code == 403 and "location" not in forged.headers
    stolen = carol.request("POST", "/oauth/authorize", data={"ask": ask, "decision": "approve"})
    assert stolen.status_code == 404 and "location" not in stolen.headers  # carol cannot answer bob's
    again = bob.request("POST", "/oauth/authorize", data={"ask": ask, "decision": "approve"})
    assert again.status_code == 404  # (carol's try spent it)


def test_an_agents_token_opens_the_mcp_gateway_only_and_nothing_secret_is_recorded(oauth_office, clean_redis,
                                                                                    redis_client):
    base = oauth_office["base"]
    bob, client_id, verifier = Browsing(base, "bob"), register(base), secrets.token_urlsafe(40)
    ask = consent(bob, authorize_query(base, client_id, verifier))
    back = bob.request("POST", "/oauth/authorize", data={"ask": ask, "decision": "approve"}).headers["location"]
    code = back.split("code=", 1)[1].split("&", 1)[0]
    token = httpx.post(f"{base}/auth/token", data={"grant_type": "authorization_code", "code": code,
                                                   "client_id": client_id, "redirect_uri": REDIRECT,
                                                   "code_verifier": verifier}, timeout=30).json()
    bearer = {"Authorization": f"Bearer {token['access_token']}"}
    for method, path in (("GET", "/v1/models"), ("GET", "/api/tags"), ("GET", "/me.json"), ("GET", "/admin/status"),
                         ("POST", "/v1/chat/completions"), ("POST", "/api/chat"), ("POST", "/v1/messages"),
                         ("GET", "/v1beta/models")):
        answer = httpx.request(method, base + path, headers=bearer, json={}, timeout=30)
        assert answer.status_code == 401, (path, answer.status_code, answer.text[:200])
    ping = httpx.post(f"{base}/mcp", headers=bearer | {"Accept": "application/json, text/event-stream",
                                                       "MCP-Protocol-Version": "2025-11-25"},
                      json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, timeout=30)
    assert ping.status_code == 400 and "Mcp-Session-Id" in ping.text, ping.text  # past the key: the protocol's turn
    records = b"".join(value for stream in (REQUEST_LOG, AUDIT_LOG)
                       for _, entry in redis_client.xrange(stream) for value in entry.values())
    stored = b"".join(redis_client.dump(key) or b"" for key in redis_client.scan_iter(match="switchboard:*"))
    for secret in (code, token["access_token"], token["refresh_token"], verifier):
        assert secret.encode() not in records and secret.encode() not in stored, secret[:6]


def _document(url: str, **changes) -> dict:
    return {"client_id": url, "client_name": "agent", "redirect_uris": [REDIRECT],
            "token_endpoint_auth_method": "none"} | changes


@pytest.mark.parametrize("attack", ["elsewhere", "http", "office-host", "redirect", "large", "other-id",
                                    "secret-client", "foreign-redirect", "not-json"])
def test_a_client_metadata_document_is_fetched_only_where_and_as_it_should_be(oauth_office, clean_redis, attack):
    """What an agent's client_id URL may make this server fetch, and what a document may say."""
    base, documents = oauth_office["base"], oauth_office["documents"]
    bob, verifier, path = Browsing(base, "bob"), secrets.token_urlsafe(40), f"/agents/{attack}.json"
    url = documents.url + path
    documents.documents[path] = {
        "redirect": (302, {"Location": f"{documents.url}/agents/fine.json"}, b""),
        "large": (200, {"Content-Type": "application/json"}, json.dumps(_document(url, pad="x" * 6000)).encode()),
        "other-id": _document(f"{documents.url}/agents/someone-else.json"),
        "secret-client": _document(url, token_endpoint_auth_method="client_secret_basic"),
        "foreign-redirect": _document(url, redirect_uris=["http://evil.example/cb"]),  # (plain http off the machine)
        "not-json": (200, {"Content-Type": "application/json"}, b"<html>"),
    }.get(attack, _document(url))
    documents.documents["/agents/fine.json"] = _document(f"{documents.url}/agents/fine.json")
    client_id = {"elsewhere": url.replace("127.0.0.1", "127.0.0.2"),  # loopback, but not the host the operator named
                 "http": url.replace("https://", "http://"),
                 "office-host": url.replace("127.0.0.1", "localhost")}.get(attack, url)
    redirect = "http://evil.example/cb" if attack == "foreign-redirect" else REDIRECT
    page = bob.request("GET", authorize_query(base, client_id, verifier, redirect_uri=redirect))
    assert page.status_code == 400 and "location" not in page.headers and 'name="ask"' not in page.text, \
        (attack, page.status_code, page.text[:300])


@pytest.mark.parametrize("addresses", [["10.0.0.5"], ["169.254.169.254"], ["127.0.0.1"], ["::1"], ["fd00::1"],
                                       ["192.168.1.20"], ["93.184.216.34", "10.0.0.5"], []])
def test_a_document_on_the_offices_own_networks_is_never_fetched(monkeypatch, addresses):
    """A client_id URL whose name resolves to any address that is not on the internet (the cloud's metadata
    service, the office's intranet, this machine) is refused before any connection is made."""
    import socket as sockets

    from identity import mcp_oauth
    monkeypatch.setattr(sockets, "getaddrinfo", lambda host, port, **_: [
        (sockets.AF_INET6 if ":" in a else sockets.AF_INET, sockets.SOCK_STREAM, 6, "", (a, port)) for a in addresses])
    monkeypatch.setattr("httpx.Client", lambda *a, **k: pytest.fail("a connection was attempted"))
    with pytest.raises(mcp_oauth.Unredirectable):
        mcp_oauth.Documents(office_hosts=("tools.office",)).fetch("https://agent.example/client.json")


def test_with_sign_in_off_there_is_no_authorization_server(stack, clean_redis):
    """The session's stack signs nobody in: none of it answers, and nothing errs."""
    for method, path in (("GET", "/.well-known/oauth-authorization-server"), ("POST", "/oauth/register"),
                         ("GET", "/.well-known/oauth-protected-resource/mcp"), ("GET", "/oauth/authorize"),
                         ("POST", "/oauth/authorize")):
        answer = httpx.request(method, stack + path, json={}, timeout=30, headers={"Accept": "text/html"})
        assert answer.status_code == 404, (path, answer.status_code, answer.text[:200])
    assert "www-authenticate" not in httpx.post(f"{stack}/mcp", json={}, timeout=30).headers
