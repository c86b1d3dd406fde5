"""Sign-in with the office's identity provider, against a real one
(node-oidc-provider: tests/integration/signin_stack.py) and two web
processes signing in with it: the console in chromium for an admin and a
403 naming why for someone else, keys minted and revoked in a person's own
page, a tampered or expired cookie refused, each of the state, nonce and
PKCE checks proven by breaking it, a command-line login (the device grant)
whose short-lived keys Claude Code's `apiKeyHelper` and Codex's provider
`auth.command` fetch (and renew; none of them in a log, a record or a
trace), the official SDKs with a credential
function, a person disabled at the provider stopped within the bound, and
an admin's "revoke everything" on every web process at once."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from selenium.webdriver.common.by import By

from identity.signin import RECHECK_LOOP_SECONDS
from ledger import audit
from protocol import keys
from scripts.processes import ROOT, stop_together
from tests.integration.browser import text_of
from tests.integration.otlp_receiver import OtlpReceiver
from tests.integration.signin_stack import (
    OPS_KEY, RECHECK_SECONDS, TOKEN_SECONDS, Browsing, start_signin_stack, through_provider, write_people,
)
from tests.integration.test_claude_code import claude
from tests.integration.test_codex import codex_run
from tests.integration.waits import wait_until

ADMIN = sys.executable, str(ROOT / "scripts" / "admin.py")
DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"


@pytest.fixture(scope="module")
def office(stack, redis_url, tmp_path_factory):
    """The provider and two web processes signing in with it (the session's worker answers their jobs),
    tracing to a receiver of the test's."""
    receiver = OtlpReceiver()
    started = start_signin_stack(redis_url, tmp_path_factory.mktemp("signin"),
                                 OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url, OTEL_BSP_SCHEDULE_DELAY="100",
                                 OTEL_SERVICE_NAME="signin-web")
    yield started | {"traces": receiver}
    stop_together([*started["webs"], started["provider"]])
    receiver.close()


@pytest.fixture
def signin(office, clean_redis, browser):
    """Everyone enabled at the provider, nobody signed in (nor a browser holding a session)."""
    write_people(office["people"])
    browser.execute_cdp_cmd("Network.clearBrowserCookies", {})
    return office


def sign_in_in_browser(browser, base: str, person: str, path: str) -> None:
    """Open `path`: sent to the provider's login form, sign in, and back."""
    browser.get(base + path)
    wait_until(lambda: browser.find_elements(By.NAME, "login"), what="the provider's login form")
    browser.find_element(By.NAME, "login").send_keys(person)
    browser.find_element(By.NAME, "password").send_keys("any password: the provider's development form")
    browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_until(lambda: browser.current_url.startswith(base) and httpx.URL(browser.current_url).path not in
               ("/login", "/login/callback"), what=f"{person} back at Switchboard")


def shown_text(browser, selector: str) -> str:
    found = browser.find_elements(By.CSS_SELECTOR, selector)
    return found[0].text if found else ""


def session_cookie(browser) -> str:
    return next(c["value"] for c in browser.get_cookies() if c["name"] == "switchboard_session")


def as_key(key: str) -> dict:
    return {"Authorization": f"Bearer {key}"}


def chat(base: str, key: str, model: str = "echo") -> httpx.Response:
    return httpx.post(f"{base}/v1/chat/completions", headers=as_key(key), timeout=60,
                      json={"model": model, "messages": [{"role": "user", "content": "hello there"}]})


def audited(redis_client, action: str) -> list[dict]:
    return [entry for entry in audit.latest(redis_client, 200) if entry["action"] == action]


# --- the console and a person's own page, in a browser -------------------------------------------------------
def test_an_admin_signs_in_and_opens_the_console(signin, browser):
    base = signin["bases"][0]
    bob = Browsing(base, "bob")
    bobs_key = bob.request("POST", "/me/keys", json={"label": "bob's"}).json()["key"]
    sign_in_in_browser(browser, base, "alice", "/admin")
    assert browser.title == "Switchboard console"
    wait_until(lambda: "echo" in text_of(browser, "#models"), what="the console's models")
    # Who signed in, and what they hold; an admin ends everything bob holds from here.
    row = wait_until(lambda: next((r for r in browser.find_elements(By.CSS_SELECTOR, "#people tbody tr")
                                   if r.text.startswith("bob")), None), what="bob among the people")
    assert "staff" in row.text and " 1 0 ok" in row.text  # (his key, no login)
    row.find_element(By.CSS_SELECTOR, ".revoke-all").click()
    browser.switch_to.alert.accept()
    wait_until(lambda: chat(base, bobs_key).status_code == 401, what="bob's key refused")
    assert bob.request("GET", "/me.json").status_code == 401
    cookie = {"Cookie": f"switchboard_session={session_cookie(browser)}"}
    export = httpx.get(f"{base}/admin/usage.csv", headers=cookie)
    assert export.status_code == 200 and export.headers["content-type"].startswith("text/csv")
    assert httpx.get(f"{base}/admin/requests.json", headers=cookie).json()["person"] is None  # everyone's
    cookies = {c["name"]: c for c in browser.get_cookies()}
    assert cookies["switchboard_session"]["secure"] and cookies["switchboard_session"]["httpOnly"]
    assert cookies["switchboard_session"]["sameSite"] == "Lax"


def test_someone_not_an_admin_is_refused_the_console_with_the_reason(signin, browser):
    base = signin["bases"][0]
    sign_in_in_browser(browser, base, "bob", "/admin")
    assert browser.title.startswith("Not an admin")
    reason = text_of(browser, "#message")
    assert "signed in as bob" in reason and "switchboard-admins" in reason
    cookie = {"Cookie": f"switchboard_session={session_cookie(browser)}"}
    refused = httpx.get(f"{base}/admin/usage.csv", headers=cookie)
    assert refused.status_code == 403 and "bob, who is not an admin" in refused.json()["error"]["message"]
    assert httpx.get(f"{base}/admin/requests.json", headers=cookie).json()["person"] == "signin:bob"  # his own only


def test_a_person_mints_a_key_uses_it_revokes_it_and_signs_out(signin, browser, redis_client):
    base = signin["bases"][0]
    sign_in_in_browser(browser, base, "bob", "/me")
    wait_until(lambda: text_of(browser, "#person") == "bob", what="his page")
    browser.find_element(By.ID, "mint-label").clear()
    browser.find_element(By.ID, "mint-label").send_keys("bob's laptop")
    browser.find_element(By.ID, "mint").click()
    shown = wait_until(lambda: shown_text(browser, "#new-key code") or shown_text(browser, "#error:not([hidden])"),
                       what="the new key")
    assert shown.startswith("sb-")
    wait_until(lambda: "bob's laptop" in text_of(browser, "#keys tbody"), what="the key on his page")
    answered = chat(base, shown)
    assert answered.status_code == 200 and answered.json()["choices"][0]["message"]["content"] == "hello there"
    refused = chat(base, shown, model="smollm2:135m")  # the keys file's [signin] allows echo* only
    assert refused.status_code in (403, 404) and "smollm2:135m" in refused.json()["error"]["message"]
    browser.find_element(By.CSS_SELECTOR, "#keys tbody .revoke").click()
    wait_until(lambda: "bob's laptop" not in text_of(browser, "#keys tbody"), what="the key gone from his page")
    assert chat(base, shown).status_code == 401
    minted, revoked = audited(redis_client, "key minted"), audited(redis_client, "key revoked")
    assert minted[0]["who"] == "bob (signed in)" and minted[0]["details"]["label"] == "bob's laptop"
    assert revoked[0]["who"] == "bob (signed in)" and revoked[0]["target"] == "bob"
    assert shown not in json.dumps(audit.latest(redis_client, 200))
    session = session_cookie(browser)
    browser.find_element(By.ID, "signout").click()
    wait_until(lambda: shown_text(browser, "#title") == "Signed out", what="the signed-out page")
    assert "switchboard_session" not in {c["name"] for c in browser.get_cookies()}
    assert httpx.get(f"{base}/me.json", headers={"Cookie": f"switchboard_session={session}"}).status_code == 401


@pytest.mark.parametrize("spoil", ["tampered", "expired", "ended"])
def test_a_spoiled_session_is_refused(signin, redis_client, spoil):
    base = signin["bases"][0]
    alice = Browsing(base, "alice")
    assert alice.request("GET", "/admin/status").status_code == 200
    if spoil == "tampered":
        alice.session = alice.session[:-1] + ("A" if alice.session[-1] != "A" else "B")
    elif spoil == "expired":  # (its record still there, its end past: our own check refuses it)
        for key in redis_client.scan_iter(match=keys.signin_session_key("*")):
            redis_client.hset(key, "expires", time.time() - 1)
    else:
        redis_client.delete(*redis_client.scan_iter(match=keys.signin_session_key("*")))
    assert alice.request("GET", "/admin/status").status_code == 401
    page = alice.request("GET", "/admin", headers={"Accept": "text/html"})
    assert page.status_code == 302 and page.headers["location"] == "/login?next=/admin"


# --- the sign-in's own checks, each broken once --------------------------------------------------------------
@pytest.mark.parametrize("broken, refusal", [
    ("none", None),
    ("state", "state does not match"),
    ("browser", "state does not match"),
    ("nonce", "the ID token does not check out"),
    ("pkce", "refused the sign-in: invalid_grant"),
    ("replayed", "state does not match"),
], ids=lambda value: value or "-")
def test_the_state_nonce_and_pkce_checks_each_refuse_a_broken_sign_in(signin, redis_client, broken, refusal):
    base, client = signin["bases"][0], httpx.Client(timeout=30)
    callback, binding = through_provider(client, base, "alice")
    state = httpx.URL(callback).params["state"]
    if broken == "state":
        callback = str(httpx.URL(callback).copy_set_param("state", "another-state"))
    elif broken == "browser":
        binding = "another-browser"
    elif broken in ("nonce", "pkce"):
        flow = json.loads(redis_client.get(keys.signin_flow_key(state)))
        flow["nonce" if broken == "nonce" else "verifier"] += "x"
        redis_client.set(keys.signin_flow_key(state), json.dumps(flow), keepttl=True)
    answer = client.get(callback, headers={"Cookie": f"switchboard_signin={binding}"})
    if broken == "replayed":  # the same answer again: its state was used once
        assert answer.status_code == 302
        answer = client.get(callback, headers={"Cookie": f"switchboard_signin={binding}"})
    if refusal is None:
        assert answer.status_code == 302 and answer.cookies.get("switchboard_session")
        return
    assert answer.status_code == 400 and refusal in answer.text and not answer.cookies.get("switchboard_session")


# --- command-line logins and the agents' helpers -------------------------------------------------------------
def device_login(base: str, home: Path, browser, person: str) -> None:
    """`scripts/admin.py login`, approved in the browser by `person` (signing in there first)."""
    env = dict(os.environ, HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"))
    login = subprocess.Popen([*ADMIN, "login", "--url", base], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    opened = login.stderr.readline()
    assert opened.startswith("Open "), opened + login.stderr.read()
    browser.execute_cdp_cmd("Network.clearBrowserCookies", {})
    sign_in_in_browser(browser, base, person, opened.split()[1].removeprefix(base))
    code = login.stderr.readline().split("the code ")[1].rstrip(".\n")
    assert text_of(browser, "#user-code") == code and text_of(browser, "#person") == person
    browser.find_element(By.ID, "approve").click()
    assert login.wait(60) == 0, login.stderr.read()
    assert f"as {person}" in login.stderr.read()
    saved = home / ".config" / "switchboard" / "credentials.json"
    assert oct(saved.stat().st_mode & 0o777) == "0o600" and oct(saved.parent.stat().st_mode & 0o777) == "0o700"


def token(base: str, home: Path) -> str:
    env = dict(os.environ, HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"))
    done = subprocess.run([*ADMIN, "token", "--url", base], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def held(home: Path, base: str) -> dict:
    return json.loads((home / ".config" / "switchboard" / "credentials.json").read_text())["servers"][base]


def test_claude_codes_api_key_helper_on_a_device_login(signin, browser, tmp_path, redis_client):
    base = signin["bases"][0]
    device_login(base, tmp_path, browser, "carol")
    helper = f"{ADMIN[0]} {ADMIN[1]} token --url {base}"
    (tmp_path / "home" / ".claude").mkdir(parents=True)
    (tmp_path / "home" / ".claude" / "settings.json").write_text(json.dumps({"apiKeyHelper": helper}))
    env = {"XDG_CONFIG_HOME": str(tmp_path / ".config"), "CLAUDE_CODE_API_KEY_HELPER_TTL_MS": "2000"}
    answer = claude(base, "say hi", tmp_path, key="", **env).strip()
    assert answer.endswith("say hi")
    first = held(tmp_path, base)["key"]
    target = tmp_path / "hello.txt"
    call = (f'<invoke name="Write"><parameter name="file_path">{target}</parameter>'
            '<parameter name="content">hello from carol</parameter></invoke>')
    claude(base, call, tmp_path, "--allowedTools", "Write", key="", **env)
    assert target.read_text() == "hello from carol"
    # Its key ends (SWITCHBOARD_SIGNIN_TOKEN_SECONDS): the helper takes a new one, the old one is refused.
    wait_until(lambda: time.time() > held(tmp_path, base)["key_expires"], timeout=TOKEN_SECONDS * 3,
               what="the helper's key to end")
    assert claude(base, "say hi again", tmp_path, key="", **env).strip().endswith("say hi again")
    second = held(tmp_path, base)["key"]
    assert second != first and chat(base, first).status_code == 401 and chat(base, second).status_code == 200
    records = [json.loads(f[b"r"]) for _, f in redis_client.xrange(keys.REQUEST_LOG)]
    logs = "".join(process.output() for process in [*signin["webs"], signin["provider"]])
    wait_until(lambda: any(span["attributes"].get("switchboard.person") == "signin:carol"
                           for span in signin["traces"].snapshot()), what="her requests' spans")
    traced = b"".join(signin["traces"].bodies)
    for secret in (first, second, held(tmp_path, base)["refresh_token"]):
        assert secret not in logs and secret not in json.dumps(records) and secret.encode() not in traced
    assert {e["target"] for e in audited(redis_client, "key minted")} == {"carol"}


def test_codex_with_its_providers_auth_command(signin, browser, tmp_path):
    base = signin["bases"][0]
    device_login(base, tmp_path, browser, "carol")
    # (Codex runs it in its own environment: the test's credentials folder is named on the command)
    config = (f'\n[model_providers.switchboard.auth]\ncommand = "/usr/bin/env"\n'
              f'args = ["XDG_CONFIG_HOME={tmp_path / ".config"}", "{ADMIN[0]}", "{ADMIN[1]}", "token", "--url", '
              f'"{base}"]\ntimeout_ms = 30000\n')
    run = codex_run(base, "say hi", tmp_path, config=config)
    assert run.returncode == 0 and run.stdout.strip() == "say hi", run.stdout + run.stderr


def test_the_official_sdks_take_a_credential_function(signin, browser, tmp_path, monkeypatch):
    import anthropic
    import openai
    from scripts import credentials
    base = signin["bases"][0]
    device_login(base, tmp_path, browser, "carol")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / ".config"))
    with openai.OpenAI(base_url=f"{base}/v1", api_key=credentials.openai_api_key(base)) as client:
        reply = client.chat.completions.create(model="echo", messages=[{"role": "user", "content": "hi openai"}])
    assert reply.choices[0].message.content == "hi openai"
    with anthropic.Anthropic(base_url=base, credentials=credentials.anthropic_credentials(base)) as client:
        message = client.messages.create(model="echo", max_tokens=50, messages=[{"role": "user", "content": "hi"}])
    assert message.content[0].text == "hi"


# --- a person who leaves, and an admin's revocation ----------------------------------------------------------
def test_a_person_disabled_at_the_provider_stops_being_served_within_the_bound(signin, browser, tmp_path,
                                                                               redis_client):
    base = signin["bases"][0]
    device_login(base, tmp_path, browser, "carol")
    carol = Browsing(base, "carol")
    kept = carol.request("POST", "/me/keys", json={"label": "fixed"}).json()["key"]
    helper_key = token(base, tmp_path)
    assert chat(base, kept).status_code == 200 and chat(base, helper_key).status_code == 200
    write_people(signin["people"], disabled=("carol",))
    disabled_at = time.monotonic()
    bound = RECHECK_SECONDS + RECHECK_LOOP_SECONDS + 5  # (the README's bound, with the provider's answer)
    wait_until(lambda: chat(base, kept).status_code == 401, timeout=bound, what="her fixed key refused")
    assert time.monotonic() - disabled_at <= bound
    assert chat(signin["bases"][1], helper_key).status_code == 401  # every web process, every key of hers
    assert carol.request("GET", "/me.json").status_code == 401  # her session too
    refused = httpx.post(f"{base}/auth/token", data={"grant_type": "refresh_token",
                                                     "refresh_token": held(tmp_path, base)["refresh_token"]})
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_grant"
    assert audited(redis_client, "person suspended")[0]["target"] == "carol"
    # Enabled again, she signs in again: her keys are served again.
    write_people(signin["people"])
    Browsing(base, "carol")
    assert chat(base, kept).status_code == 200 and audited(redis_client, "person restored")[0]["target"] == "carol"


def test_revoking_everything_takes_effect_on_every_web_process_at_once(signin, browser, tmp_path, redis_client):
    first, second = signin["bases"]
    device_login(first, tmp_path, browser, "carol")
    carol = Browsing(first, "carol")
    kept = carol.request("POST", "/me/keys", json={"label": "fixed"}).json()["key"]
    helper_key = token(first, tmp_path)
    assert all(chat(base, key).status_code == 200 for base in (first, second) for key in (kept, helper_key))
    people = httpx.get(f"{first}/admin/people", headers=as_key(OPS_KEY)).json()["people"]
    assert {p["person"]: (p["keys"], p["logins"]) for p in people}["carol"] == (2, 1)
    revoked = httpx.post(f"{first}/admin/people/carol/revoke", headers=as_key(OPS_KEY))
    assert revoked.json() == {"person": "carol", "keys": 2, "logins": 1, "sessions": 2,  # (the browser's, the test's)
                              "mcp_accounts": 0}
    ended_at = time.monotonic()
    assert all(chat(base, key).status_code == 401 for base in (second, first) for key in (kept, helper_key))
    assert carol.request("GET", "/me.json", base=second).status_code == 401
    assert time.monotonic() - ended_at < 1.0  # (the first request to each web process after it was refused)
    refused = httpx.post(f"{second}/auth/token", data={"grant_type": "refresh_token",
                                                       "refresh_token": held(tmp_path, first)["refresh_token"]})
    assert refused.json()["error"] == "invalid_grant"
    assert audited(redis_client, "everything revoked")[0]["who"] == "ops (an admin)"


# --- whatever a browser or a tool sends: a 4xx, never a 5xx ----------------------------------------------------
PRINTABLE = st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E, exclude_characters=";"),
                    max_size=300)
ANY_TEXT = st.one_of(PRINTABLE, st.text(max_size=60), st.sampled_from(["", "A" * 5000, "%00", "../../etc", "x" * 201]))
FIELDS = st.dictionaries(st.sampled_from(["code", "state", "error", "error_description", "iss", "next", "user_code",
                                          "grant_type", "device_code", "refresh_token", "label", "client_id",
                                          "decision"]), ANY_TEXT, max_size=5)
GRANTS = st.sampled_from([DEVICE_GRANT, "refresh_token", "authorization_code", "client_credentials", "", "x" * 300])
REQUESTS = st.one_of(
    st.tuples(st.just("GET"), st.sampled_from(["/login", "/login/callback", "/login/device", "/me", "/me.json",
                                               "/admin", "/admin/status"]), FIELDS, st.none()),
    st.tuples(st.just("POST"), st.sampled_from(["/auth/token", "/auth/device", "/login/device", "/logout",
                                                "/admin/people/bob/forget", "/admin/people/x%0a/revoke"]),
              FIELDS, st.none()),
    st.tuples(st.just("POST"), st.just("/auth/token"), st.fixed_dictionaries({"grant_type": GRANTS}, optional={
        "device_code": ANY_TEXT, "refresh_token": ANY_TEXT}), st.none()),
    st.tuples(st.just("POST"), st.just("/me/keys"), st.just({}), st.recursive(
        st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20), ANY_TEXT),
        lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(
            st.sampled_from(["label", "days", "models", "admin", "x"]), inner, max_size=4)), max_leaves=8)),
    st.tuples(st.just("DELETE"), st.builds(lambda k: f"/me/keys/{k}", PRINTABLE.filter(lambda k: "/" not in k
                                                                                      and "?" not in k and
                                                                                      "#" not in k and k)),
              st.just({}), st.none()),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sent=REQUESTS, cookie=st.one_of(st.none(), PRINTABLE.map(str.strip)), signed_in=st.booleans(),
       forwarded=st.one_of(st.none(), PRINTABLE.map(str.strip), st.sampled_from(["192.0.2.1", "192.0.2.1, ::1"])),
       origin=st.sampled_from([None, "http://evil.example", "null", "vscode-webview://x"]))
def test_the_sign_in_routes_answer_anything_with_a_4xx_never_a_5xx(fuzzed_office, sent, cookie, signed_in,
                                                                    forwarded, origin):
    method, path, fields, body = sent
    base, session = fuzzed_office
    cookies = "; ".join(part for part in (
        f"switchboard_session={session}" if signed_in else "",
        f"switchboard_signin={cookie}" if cookie is not None else "",
        f"switchboard_session={cookie}" if cookie is not None and not signed_in else "") if part)
    headers = {"Origin": origin or base, "Accept": "text/html"} | ({"Cookie": cookies} if cookies else {}) | \
        ({"X-Forwarded-For": forwarded} if forwarded else {})
    options = {"params": fields} if method == "GET" else {"json": body} if body is not None else {"data": fields}
    answer = httpx.request(method, base + path, headers=headers, timeout=30, **options)
    assert answer.status_code < 500, (method, path, fields, body, answer.text[:500])


@pytest.fixture(scope="module")
def fuzzed_office(office):
    """A web process of the office, and a session of bob's on it for the fuzz to use (or not)."""
    write_people(office["people"])
    return office["bases"][0], Browsing(office["bases"][0], "bob").session
