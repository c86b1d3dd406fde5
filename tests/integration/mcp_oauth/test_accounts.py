"""Each person's own account on an OAuth-protected MCP server (issue 72,
part 2): "wiki" is an MCP server written with the official SDK's server
auth (tests/mcp_servers/oauth_server.py), whose authorization server is a
node-oidc-provider of its own (registration, resource indicators, short
opaque tokens, introspection). Switchboard discovers it, registers there,
and each person connects their own account from /me; calls through the
gateway and a model's server-side calls then carry their caller's token."""
from __future__ import annotations

import json
import time

import httpx

from dialects.mcp import CLIENT_CAPABILITIES_META
from ledger import audit
from protocol import keys
from tests.integration.oauth_office import WIKI_TOKEN_SECONDS
from tests.integration.signin_stack import Browsing, signed_in_at_provider, write_people
from tests.integration.test_mcp_gateway import META, stateless
from tests.integration.test_server_tools import invoke, user
from tests.integration.waits import wait_until



def minted_key(person: Browsing) -> str:
    answer = person.request("POST", "/me/keys", json={"label": "tests", "days": 1})
    assert answer.status_code == 201, answer.text
    return answer.json()["key"]


def connect(person: Browsing, issuer: str) -> None:
    """The person's "connect" on /me: to the wiki's sign-in (their browser there is new), and back."""
    answer = person.request("GET", "/me/mcp/wiki/connect")
    assert answer.status_code == 303 and answer.headers["location"].startswith(issuer + "/"), answer.text[-600:]
    with httpx.Client(timeout=30) as browser:
        back = signed_in_at_provider(browser, answer.headers["location"], person.base, person.person)
    assert back.startswith(f"{person.base}/me/mcp/callback?"), back
    done = person.request("GET", back.removeprefix(person.base))
    assert done.status_code == 303 and done.headers["location"] == "/me#mcp", done.text[:500]


def whoami(base: str, key: str, elicit: bool = False) -> dict:
    meta = META | ({CLIENT_CAPABILITIES_META: {"elicitation": {"url": {}}}} if elicit else {})
    answer = stateless(base, key, "tools/call", {"_meta": meta, "name": "wiki__whoami", "arguments": {}})
    assert answer.status_code == 200, answer.text
    return answer.json()


def said(answer: dict) -> str:
    return "\n".join(part["text"] for part in answer["result"]["content"])


def seen_tokens(notes) -> dict[str, set[str]]:
    """The tokens that reached the wiki, by whose they were."""
    found: dict[str, set[str]] = {}
    for line in notes.read_text().splitlines() if notes.exists() else []:
        _, subject, token = line.split(" ", 2)
        found.setdefault(subject, set()).add(token)
    return found


def test_two_people_connect_their_own_accounts_and_each_call_carries_its_callers(
        wiki, oauth_office, mcp_stack, redis_client, clean_redis):
    base, connect_url = oauth_office["base"], f"{oauth_office['base']}/me/mcp/wiki/connect"
    bob, carol = Browsing(base, "bob"), Browsing(base, "carol")
    bob_key, carol_key = minted_key(bob), minted_key(carol)
    answers = []

    # not connected yet: the agent's model is told where to connect; a client that takes URL elicitations gets one
    first = whoami(base, bob_key)
    answers.append(first)
    assert first["result"]["isError"] is True and connect_url in said(first), first
    elicited = whoami(base, bob_key, elicit=True)
    assert elicited["error"]["code"] == -32042, elicited
    [asked] = elicited["error"]["data"]["elicitations"]
    assert asked["mode"] == "url" and asked["url"] == connect_url and asked["elicitationId"] and "wiki" in asked["message"]
    shown = bob.request("GET", "/me.json").json()["mcp_accounts"]
    assert shown == [{"server": "wiki", "connected": None, "connect": "/me/mcp/wiki/connect"}]

    # bob connects his own account: his calls act as him; carol's are still sent to connect
    connect(bob, wiki["issuer"])
    answers.append(whoami(base, bob_key))
    assert said(answers[-1]) == "you are bob on the wiki"
    answers.append(whoami(base, carol_key))
    assert answers[-1]["result"]["isError"] and connect_url in said(answers[-1])
    connect(carol, wiki["issuer"])
    answers.append(whoami(base, carol_key))
    assert said(answers[-1]) == "you are carol on the wiki"
    assert bob.request("GET", "/me.json").json()["mcp_accounts"][0]["connected"] > 0

    # a model's server-side call carries its person's token too
    chat = httpx.post(f"{base}/v1/chat/completions", headers={"Authorization": f"Bearer {carol_key}"}, timeout=60,
                      json={"model": "echo:wiki", "messages": user(invoke("whoami"))})
    answers.append(chat.json())
    assert chat.status_code == 200 and "you are carol on the wiki" in chat.text, chat.text

    # a token about to end is refreshed by the pool at the next call, without the person
    first_tokens = seen_tokens(wiki["notes"])["bob"]
    ends = float(redis_client.hget(keys.mcp_account_key("wiki", "signin:bob"), "expires"))
    assert time.time() < ends < time.time() + WIKI_TOKEN_SECONDS + 1, ends - time.time()
    wait_until(lambda: time.time() >= ends - WIKI_TOKEN_SECONDS / 3, timeout=WIKI_TOKEN_SECONDS + 30,
               what="the token's last third")
    assert said(whoami(base, bob_key)) == "you are bob on the wiki"
    assert len(seen_tokens(wiki["notes"])["bob"]) == len(first_tokens) + 1
    assert float(redis_client.hget(keys.mcp_account_key("wiki", "signin:bob"), "expires")) > ends

    # the operator sees who connected what; the audit log has each connect
    alice = Browsing(base, "alice")
    servers = alice.request("GET", "/admin/status").json()["mcp"]["servers"]
    wiki_row = next(row for row in servers if row["name"] == "wiki")
    assert wiki_row["auth"] == "oauth" and sorted(a["person"] for a in wiki_row["connected"]) == ["bob", "carol"]
    connects = [e for e in audit.latest(redis_client) if e.get("action") == "mcp account connected"]
    assert sorted(e["target"] for e in connects) == ["bob", "carol"]

    # bob disconnects: sent to connect again, and it is in the audit log
    gone = bob.request("POST", "/me/mcp/wiki/disconnect")
    assert gone.status_code == 200 and gone.json() == {"server": "wiki", "connected": False}
    answers.append(whoami(base, bob_key))
    assert answers[-1]["result"]["isError"] and connect_url in said(answers[-1])
    assert any(e.get("action") == "mcp account disconnected" and e["target"] == "bob"
               for e in audit.latest(redis_client))

    # no token of theirs is anywhere but at the wiki: answers, process logs, traces, the request log, Redis
    tokens = set().union(*seen_tokens(wiki["notes"]).values())
    assert len(tokens) >= 3
    traces = oauth_office["traces"]
    wait_until(lambda: any(s["name"] == "execute_tool whoami" for s in traces.snapshot()), what="the calls' spans")
    processes = [*oauth_office["webs"], *mcp_stack[3]]
    places = {"answers": json.dumps(answers), **{p.name + str(i): p.output() for i, p in enumerate(processes)},
              "redis": _everything_in(redis_client), "traces": b"".join(traces.bodies).decode(errors="replace")}
    for where, text in places.items():
        assert not any(token in text for token in tokens), f"a token is in {where}"


def test_suspension_drops_a_persons_tokens(wiki, oauth_office, redis_client, clean_redis):
    base = oauth_office["base"]
    carol = Browsing(base, "carol")
    key = minted_key(carol)
    connect(carol, wiki["issuer"])
    assert redis_client.sismember(keys.mcp_person_accounts_key("signin:carol"), "wiki")
    write_people(oauth_office["people"], disabled=("carol",))
    try:
        wait_until(lambda: not redis_client.exists(keys.mcp_account_key("wiki", "signin:carol")), timeout=30)
    finally:
        write_people(oauth_office["people"])
    assert not redis_client.exists(keys.mcp_person_accounts_key("signin:carol"))
    assert redis_client.zscore(keys.mcp_accounts_key("wiki"), "signin:carol") is None
    suspended = next(e for e in audit.latest(redis_client) if e.get("action") == "person suspended")
    assert suspended["target"] == "carol" and suspended["details"]["mcp_accounts"] == 1
    assert whoami_status(base, key) == 401  # (and her keys with it)


def whoami_status(base: str, key: str) -> int:
    return stateless(base, key, "tools/call", {"name": "wiki__whoami", "arguments": {}}).status_code


def _everything_in(redis_client) -> str:
    """Every value in the test's Redis database, as text."""
    found = []
    for key in redis_client.scan_iter(count=1000):
        kind = redis_client.type(key).decode()
        value = {"string": lambda: redis_client.get(key), "hash": lambda: redis_client.hgetall(key),
                 "list": lambda: redis_client.lrange(key, 0, -1), "set": lambda: redis_client.smembers(key),
                 "zset": lambda: redis_client.zrange(key, 0, -1),
                 "stream": lambda: redis_client.xrange(key)}.get(kind, lambda: b"")()
        found.append(repr(value))
    return "\n".join(found)


def test_a_persons_page_says_what_they_have_and_connects_in_the_browser(wiki, oauth_office, browser, clean_redis):
    """In chromium: bob's page lists his models with their windows, the MCP servers and tools he may call, and
    each agent's set-up; he connects the wiki there (its sign-in in the same browser), then disconnects it."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By

    from tests.integration.test_signin import sign_in_in_browser

    def shown_text(browser, selector: str) -> str:
        """The element's text now ("" while the page is drawing it again: its rows are replaced on each load)."""
        try:
            found = browser.find_elements(By.CSS_SELECTOR, selector)
            return found[0].text if found else ""
        except StaleElementReferenceException:
            return ""

    base = oauth_office["base"]
    browser.execute_cdp_cmd("Network.clearBrowserCookies", {})
    sign_in_in_browser(browser, base, "bob", "/me")
    wait_until(lambda: browser.find_elements(By.CSS_SELECTOR, "#models tr[data-model]"), what="bob's models")
    models = {row.get_attribute("data-model"): row.text for row in
              browser.find_elements(By.CSS_SELECTOR, "#models tr[data-model]")}
    assert set(models) == {"echo", "echo:wiki"}, models  # (his policy's: not the stack's other echo models)
    time_row = wait_until(lambda: shown_text(browser, '#mcp-servers tr[data-server="time"]'))
    assert "get_current_time" in time_row and "convert_time" in time_row
    assert "not connected" in shown_text(browser, '#mcp-servers tr[data-server="wiki"]')
    assert set(shown_text(browser, "#mcp-servers tbody").split()) >= {"time", "wiki"}
    assert "tools" not in [row.get_attribute("data-server") for row in
                           browser.find_elements(By.CSS_SELECTOR, "#mcp-servers tr[data-server]")]
    agents = {d.get_attribute("data-client"): d for d in browser.find_elements(By.CSS_SELECTOR, "#agents-list details")}
    assert {"claude-code", "codex", "gemini-cli", "opencode", "aider"} <= set(agents)
    agents["claude-code"].click()
    claude = agents["claude-code"].text
    assert f"claude mcp add --transport http office {base}/mcp" in claude and "claude mcp login office" in claude
    assert "--sign-in" in claude and "~/.claude/settings.json" in claude and f'"ANTHROPIC_BASE_URL": "{base}"' in claude
    agents["gemini-cli"].click()
    assert '"enabled": true' in agents["gemini-cli"].text and f'"httpUrl": "{base}/mcp"' in agents["gemini-cli"].text

    # connect: to the wiki's sign-in and back, in the browser
    browser.find_element(By.CSS_SELECTOR, '#mcp-servers tr[data-server="wiki"] a.connect').click()
    wait_until(lambda: browser.find_elements(By.NAME, "login"), what="the wiki's login form")
    assert browser.current_url.startswith(wiki["issuer"])
    browser.find_element(By.NAME, "login").send_keys("bob")
    browser.find_element(By.NAME, "password").send_keys("any")
    browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_until(lambda: "acts as you: connected" in shown_text(browser, '#mcp-servers tr[data-server="wiki"]'),
               what="the wiki connected on bob's page")
    assert browser.current_url == f"{base}/me#mcp"
    browser.find_element(By.CSS_SELECTOR, '#mcp-servers tr[data-server="wiki"] button.disconnect').click()
    wait_until(lambda: "not connected" in shown_text(browser, '#mcp-servers tr[data-server="wiki"]'),
               what="the wiki disconnected")
