"""People's own accounts on an OAuth MCP server (identity/mcp_accounts.py),
attacked: what could a colleague, a page in a person's browser, or a key of
the keys file with a person's name do with someone else's account?"""
from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import httpx

from protocol import keys
from tests.integration.mcp_stack import ALICE_KEY
from tests.integration.signin_stack import Browsing, signed_in_at_provider
from tests.integration.mcp_oauth.test_accounts import connect, minted_key, said, whoami


def test_a_colleague_who_opens_a_persons_callback_gets_nothing(wiki, oauth_office, redis_client, clean_redis):
    """Bob starts connecting and signs in at the wiki; the link back (his state, the wiki's code) reaches
    carol (a login CSRF: she would act as bob there, or bob as her): refused, and bob's state is spent."""
    base = oauth_office["base"]
    bob, carol = Browsing(base, "bob"), Browsing(base, "carol")
    started = bob.request("GET", "/me/mcp/wiki/connect")
    with httpx.Client(timeout=30) as browser:
        back = signed_in_at_provider(browser, started.headers["location"], base, "bob")
    taken = carol.request("GET", back.removeprefix(base))
    assert taken.status_code == 400 and "not started by you" in taken.text
    for person in ("signin:bob", "signin:carol"):
        assert not redis_client.exists(keys.mcp_account_key("wiki", person))
    assert bob.request("GET", back.removeprefix(base)).status_code == 400  # (taken once, whoever took it)


def test_a_forged_or_replayed_answer_connects_nothing(wiki, oauth_office, redis_client, clean_redis):
    base = oauth_office["base"]
    bob = Browsing(base, "bob")
    for query in ({"state": "made-up", "code": "x"}, {"code": "x"}, {"state": "", "code": ""},
                  {"error": "access_denied", "state": "made-up"}):
        answer = bob.request("GET", "/me/mcp/callback", params=query)
        assert answer.status_code in (400, 403), answer.text
    connect(bob, wiki["issuer"])
    # the same answer again (its state taken): refused, bob's account as it was
    started = bob.request("GET", "/me/mcp/wiki/connect")
    with httpx.Client(timeout=30) as browser:
        back = signed_in_at_provider(browser, started.headers["location"], base, "bob")
    assert bob.request("GET", back.removeprefix(base)).status_code == 303
    assert bob.request("GET", back.removeprefix(base)).status_code == 400
    # an answer naming another issuer than the wiki's (a mix-up) is refused before any code is traded
    started = bob.request("GET", "/me/mcp/wiki/connect")
    with httpx.Client(timeout=30) as browser:
        back = signed_in_at_provider(browser, started.headers["location"], base, "bob")
    state = parse_qs(urlsplit(back).query)["state"][0]
    mixed = bob.request("GET", "/me/mcp/callback", params={"state": state, "code": "x", "iss": "https://evil.example"})
    assert mixed.status_code == 400 and "another authorization server" in mixed.text


def test_a_keys_file_key_with_a_persons_name_never_reaches_their_account(wiki, oauth_office, mcp_stack,
                                                                          clean_redis):
    """Signed-in alice connects the wiki; the keys file's key named alice (another credential, perhaps another
    person) is sent to connect, never given her token."""
    alice = Browsing(oauth_office["base"], "alice")
    connect(alice, wiki["issuer"])
    assert said(whoami(oauth_office["base"], minted_key(alice))) == "you are alice on the wiki"
    answer = whoami(mcp_stack[0], ALICE_KEY)
    assert answer["result"]["isError"] and "/me/mcp/wiki/connect" in said(answer)
    assert "alice on the wiki" not in said(answer)


def test_a_page_cannot_connect_or_disconnect_for_a_person(wiki, oauth_office, redis_client, clean_redis):
    """A web page the person opens, posting to Switchboard from its own origin, is refused (the boundary);
    a server the person's policy does not give them is not there to connect."""
    base = oauth_office["base"]
    bob = Browsing(base, "bob")
    connect(bob, wiki["issuer"])
    posted = bob.request("POST", "/me/mcp/wiki/disconnect", headers={"Origin": "https://evil.example"})
    assert posted.status_code == 403 and redis_client.exists(keys.mcp_account_key("wiki", "signin:bob"))
    for server in ("tools", "time", "nosuch", "../wiki"):
        assert bob.request("GET", f"/me/mcp/{server}/connect").status_code == 404
