"""The OAuth endpoints fuzzed with hypothesis, sign-in on: agents' registration, authorization and token
requests, the metadata, and people's connections to OAuth MCP servers. Whatever an agent, a browser or an
attacker sends: a 4xx (or the page, or a redirect), never a 5xx."""
from __future__ import annotations

import json
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tests.integration.signin_stack import Browsing
from tests.integration.test_fuzz import JSON

ODD_TEXT = st.one_of(st.text(max_size=80), st.sampled_from([
    "S256", "plain", "code", "none", "http://127.0.0.1:9/cb", "https://evil.example/cb", "javascript:alert(1)",
    "http://127.0.0.1:9/cb#frag", "http://u@127.0.0.1/cb", "/mcp", "sbc-x", "sbr-x", "%00", "\x00", "\ud800",
    "a" * 3000]), st.text(alphabet=st.characters(categories=["Cs"]), min_size=1, max_size=2))
PARAM = st.one_of(ODD_TEXT, st.integers(-10**6, 10**20).map(str))
AUTHORIZE = st.dictionaries(st.sampled_from(["client_id", "redirect_uri", "response_type", "code_challenge",
                                             "code_challenge_method", "state", "resource", "scope"]), PARAM,
                            max_size=8)
TOKEN = st.fixed_dictionaries({"grant_type": st.one_of(st.sampled_from(
    ["authorization_code", "refresh_token", "urn:ietf:params:oauth:grant-type:device_code", "password"]), PARAM)},
    optional={name: PARAM for name in ("code", "code_verifier", "redirect_uri", "client_id", "refresh_token",
                                       "resource", "device_code", "scope")})
REGISTRATION = st.one_of(JSON, st.fixed_dictionaries({}, optional={
    "redirect_uris": st.one_of(st.lists(ODD_TEXT, max_size=12), JSON), "client_name": st.one_of(ODD_TEXT, JSON),
    "grant_types": st.one_of(st.lists(st.sampled_from(["authorization_code", "refresh_token", "implicit"])), JSON),
    "response_types": JSON, "token_endpoint_auth_method": st.one_of(ODD_TEXT, JSON), "client_id": JSON,
    "scope": JSON}))


def _safe(text: str) -> str:
    return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


@pytest.fixture(scope="module")
def signed_in(oauth_office):
    return Browsing(oauth_office["base"], "bob")


def _unthrottled(redis_client) -> None:
    for key in redis_client.scan_iter(match="switchboard:signin:throttle:*"):
        redis_client.delete(key)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=REGISTRATION)
def test_agent_registrations_are_never_a_5xx(oauth_office, redis_client, body):
    _unthrottled(redis_client)
    answer = httpx.post(oauth_office["base"] + "/oauth/register", content=json.dumps(body).encode(), timeout=30,
                        headers={"Content-Type": "application/json"})
    assert answer.status_code in (201, 400), answer.text


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=AUTHORIZE, decision=st.tuples(PARAM, PARAM))
def test_authorization_requests_and_answers_are_never_a_5xx(oauth_office, signed_in, query, decision):
    shown = signed_in.request("GET", "/oauth/authorize", params={k: _safe(v) for k, v in query.items()})
    assert shown.status_code < 500, shown.text
    answered = signed_in.request("POST", "/oauth/authorize",
                                 data={"ask": _safe(decision[0]), "decision": _safe(decision[1])})
    assert answered.status_code < 500, answered.text


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(form=TOKEN)
def test_token_requests_are_never_a_5xx(oauth_office, redis_client, form):
    _unthrottled(redis_client)
    answer = httpx.post(oauth_office["base"] + "/auth/token", data={k: _safe(v) for k, v in form.items()},
                        timeout=30)
    assert 400 <= answer.status_code < 500 and "error" in answer.json(), answer.text


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=ODD_TEXT, query=st.dictionaries(st.sampled_from(["state", "code", "iss", "error", "error_description"]),
                                            PARAM, max_size=5))
def test_metadata_and_account_connections_are_never_a_5xx(oauth_office, signed_in, redis_client, name, query):
    _unthrottled(redis_client)
    path = quote(_safe(name), safe="")
    for method, route, options in (
            ("GET", f"/.well-known/oauth-protected-resource/mcp/{path}", {}),
            ("GET", "/.well-known/oauth-authorization-server", {}),
            ("GET", f"/me/mcp/{path}/connect", {}),
            ("POST", f"/me/mcp/{path}/disconnect", {}),
            ("GET", "/me/mcp/callback", {"params": {k: _safe(v) for k, v in query.items()}})):
        answer = signed_in.request(method, route, **options)
        assert answer.status_code < 500, (route, answer.text[:300])
