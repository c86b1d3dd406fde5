"""identity/mcp_oauth.py: the MCP gateway's authorization server's rules,
each attacked in several forms (fakeredis; the flow end to end over HTTP is
tests/integration/mcp_oauth/test_agents.py)."""
from __future__ import annotations

import secrets

import fakeredis
import pytest

from identity import mcp_oauth
from identity.device_login import Refused
from protocol import keys

RESOURCE = "https://switchboard.office/mcp"
RESOURCES = (RESOURCE, RESOURCE + "/time")


@pytest.fixture
def redis():
    return fakeredis.FakeRedis()


def registered(redis, uris=("http://127.0.0.1:33418/callback",)) -> dict:
    return mcp_oauth.register(redis, {"redirect_uris": list(uris), "client_name": "agent"})


def ask_args(client: dict, verifier: str, **changes) -> dict:
    return {"client_id": client["client_id"], "redirect_uri": client["redirect_uris"][0], "response_type": "code",
            "code_challenge": mcp_oauth.challenge_of(verifier), "code_challenge_method": "S256", "state": "s1",
            "resource": RESOURCE} | changes


def code_for(redis, client: dict, verifier: str) -> str:
    ask = mcp_oauth.check_ask(redis, ask_args(client, verifier), RESOURCES)
    return mcp_oauth.issue_code(redis, ask, "bob", ("staff",))


@pytest.mark.parametrize("uri", [
    "http://evil.example/callback",  # plain http off the machine
    "http://127.0.0.1.evil.example/cb", "http://localhost@evil.example/cb",  # loopback in name only
    "https://app.example/cb#fragment", "javascript:alert(1)", "http:///cb", "http://127.0.0.1:x/cb",
    "https://app.example/ cb", 17, "",
])
def test_a_redirect_uri_off_the_machine_or_malformed_is_refused_at_registration(redis, uri):
    with pytest.raises(mcp_oauth.BadClient) as refused:
        registered(redis, [uri])
    assert refused.value.error == "invalid_redirect_uri"


@pytest.mark.parametrize("metadata", [
    None, [], {"redirect_uris": []}, {"redirect_uris": "http://127.0.0.1/cb"},
    {"redirect_uris": ["http://127.0.0.1/cb"], "token_endpoint_auth_method": "client_secret_basic"},
    {"redirect_uris": ["http://127.0.0.1/cb"], "grant_types": ["client_credentials"]},
    {"redirect_uris": ["http://127.0.0.1/cb"], "grant_types": ["implicit"]},
    {"redirect_uris": ["http://127.0.0.1/cb"], "response_types": ["token"]},
    {"redirect_uris": ["http://127.0.0.1/cb"], "client_name": "x" * 101},
    {"redirect_uris": ["http://127.0.0.1/cb"] * 11},
])
def test_registration_takes_public_code_clients_only(redis, metadata):
    with pytest.raises(mcp_oauth.BadClient):
        mcp_oauth.register(redis, metadata)


def test_a_loopback_redirect_may_change_its_port_and_nothing_else(redis):
    client = registered(redis)
    verifier = secrets.token_urlsafe(40)
    assert mcp_oauth.check_ask(redis, ask_args(client, verifier, redirect_uri="http://127.0.0.1:5000/callback"),
                               RESOURCES).redirect_uri == "http://127.0.0.1:5000/callback"
    for other in ("http://127.0.0.1:5000/other", "http://localhost:5000/callback", "https://127.0.0.1/callback",
                  "http://127.0.0.1:5000/callback?x=1", "http://evil.example:33418/callback",
                  "http://127.0.0.1:5000@evil.example/callback"):
        with pytest.raises(mcp_oauth.Unredirectable):
            mcp_oauth.check_ask(redis, ask_args(client, verifier, redirect_uri=other), RESOURCES)


def test_an_ask_needs_a_known_client_pkce_s256_and_our_resource(redis):
    client = registered(redis)
    verifier = secrets.token_urlsafe(40)
    with pytest.raises(mcp_oauth.Unredirectable):
        mcp_oauth.check_ask(redis, ask_args(client, verifier, client_id="sbc-forged"), RESOURCES)
    for changes, error in (({"code_challenge_method": "plain"}, "invalid_request"),
                           ({"code_challenge": ""}, "invalid_request"),
                           ({"code_challenge": "short"}, "invalid_request"),
                           ({"response_type": "token"}, "unsupported_response_type"),
                           ({"resource": "https://other.example/mcp"}, "invalid_target")):
        with pytest.raises(Refused) as refused:
            mcp_oauth.check_ask(redis, ask_args(client, verifier, **changes), RESOURCES)
        assert refused.value.error == error and isinstance(refused.value, mcp_oauth.SentBack)
        assert refused.value.redirect_uri == client["redirect_uris"][0]


def test_a_code_is_taken_once_by_its_client_with_its_verifier(redis):
    client, other = registered(redis), registered(redis)
    verifier = secrets.token_urlsafe(40)
    form = {"client_id": client["client_id"], "redirect_uri": client["redirect_uris"][0],
            "code_verifier": verifier, "resource": RESOURCE}
    for attack in ({"client_id": other["client_id"]}, {"code_verifier": secrets.token_urlsafe(40)},
                   {"code_verifier": ""}, {"redirect_uri": "http://127.0.0.1:1/elsewhere"},
                   {"resource": RESOURCE + "/time"}):
        code = code_for(redis, client, verifier)
        with pytest.raises(Refused):
            mcp_oauth.take_code(redis, form | attack | {"code": code})
        with pytest.raises(Refused):  # (and a failed try spends it)
            mcp_oauth.take_code(redis, form | {"code": code})
    code = code_for(redis, client, verifier)
    assert mcp_oauth.take_code(redis, form | {"code": code})["person"] == "bob"
    with pytest.raises(Refused) as again:
        mcp_oauth.take_code(redis, form | {"code": code})
    assert again.value.error == "invalid_grant"
    assert not any(code in key.decode() for key in redis.scan_iter())  # kept as its digest only


def test_a_refresh_token_rotates_is_bound_to_its_client_and_ends_with_the_persons_logins(redis):
    client, other = registered(redis), registered(redis)
    verifier = secrets.token_urlsafe(40)
    code = code_for(redis, client, verifier)
    authorized = mcp_oauth.take_code(redis, {"code": code, "client_id": client["client_id"],
                                             "code_verifier": verifier})
    grant = mcp_oauth.new_grant(redis, authorized, 30, lambda person: True)
    with pytest.raises(Refused):  # another client cannot use it, and the try ends it (it may be stolen)
        mcp_oauth.refresh(redis, {"refresh_token": grant.refresh_token, "client_id": other["client_id"]}, 30,
                          lambda person: True)
    grant = mcp_oauth.new_grant(redis, mcp_oauth.take_code(redis, {
        "code": code_for(redis, client, verifier), "client_id": client["client_id"], "code_verifier": verifier}), 30,
        lambda person: True)
    later = mcp_oauth.refresh(redis, {"refresh_token": grant.refresh_token, "client_id": client["client_id"]}, 30,
                              lambda person: True)
    assert later.person == "bob" and later.refresh_token != grant.refresh_token
    with pytest.raises(Refused):  # rotated: the old one is spent
        mcp_oauth.refresh(redis, {"refresh_token": grant.refresh_token, "client_id": client["client_id"]}, 30,
                          lambda person: True)
    with pytest.raises(Refused):  # a person who may hold nothing now gets nothing
        mcp_oauth.refresh(redis, {"refresh_token": later.refresh_token, "client_id": client["client_id"]}, 30,
                          lambda person: False)
    from identity import device_login
    fresh = mcp_oauth.new_grant(redis, mcp_oauth.take_code(redis, {
        "code": code_for(redis, client, verifier), "client_id": client["client_id"], "code_verifier": verifier}), 30,
        lambda person: True)
    assert [login["label"] for login in device_login.of_person(redis, "bob")] == ["MCP: agent"]
    with pytest.raises(Refused):  # a command-line login's grant does not take it
        device_login.use(redis, fresh.refresh_token, 30)
    device_login.end_all(redis, "bob")
    with pytest.raises(Refused):
        mcp_oauth.refresh(redis, {"refresh_token": fresh.refresh_token, "client_id": client["client_id"]}, 30,
                          lambda person: True)
    assert not redis.exists(keys.cli_logins_key("bob"))


def test_a_refresh_tokens_holder_is_looked_at_without_spending_it(redis):
    client, verifier = registered(redis), secrets.token_urlsafe(40)
    grant = mcp_oauth.new_grant(redis, mcp_oauth.take_code(redis, {
        "code": code_for(redis, client, verifier), "client_id": client["client_id"], "code_verifier": verifier}), 30,
        lambda person: True)
    form = {"refresh_token": grant.refresh_token, "client_id": client["client_id"]}
    assert mcp_oauth.holder(redis, form) == mcp_oauth.holder(redis, form) == "bob"
    assert mcp_oauth.refresh(redis, form, 30, lambda person: True).person == "bob"  # (still unspent)
    assert mcp_oauth.holder(redis, form) is None  # spent now
    for token in ("", "sbl-x", "sbr-" + "x" * 300, "sbr-unknown"):
        assert mcp_oauth.holder(redis, {"refresh_token": token}) is None


def test_a_consent_page_answers_only_its_person_once(redis):
    client = registered(redis)
    ask = mcp_oauth.check_ask(redis, ask_args(client, secrets.token_urlsafe(40)), RESOURCES)
    ask_id = mcp_oauth.hold_ask(redis, ask, "bob")
    assert mcp_oauth.take_ask(redis, ask_id, "mallory") is None
    assert mcp_oauth.take_ask(redis, ask_id, "bob") is None  # (the wrong person's try spent it)
    ask_id = mcp_oauth.hold_ask(redis, ask, "bob")
    assert mcp_oauth.take_ask(redis, ask_id, "bob") == ask
    assert mcp_oauth.take_ask(redis, ask_id, "bob") is None
