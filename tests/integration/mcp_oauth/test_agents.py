"""An agent adds the MCP gateway with no key (issue 72, part 1): the official
`mcp` SDK's OAuth client provider against /mcp on a Switchboard signing in
with a real OpenID provider (node-oidc-provider), its calls run by the MCP
stack's real pool. Discovery (RFC 9728, RFC 8414), registration (RFC 7591),
the person's sign-in and consent, a tool call, a refresh once the access
token ends, and refusal after the person's credentials are revoked."""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from urllib.parse import parse_qs, urlsplit

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata

from protocol.keys import signin_suspended_key, signin_throttle_key
from tests.integration.oauth_office import TOKEN_SECONDS
from tests.integration.signin_stack import Browsing, through_provider, write_people
from tests.integration.test_claude_code import CLAUDE, claude
from tests.integration.test_codex import PINNED
from tests.integration.waits import wait_until

REDIRECT = "http://127.0.0.1:9/callback"  # the agent's loopback listener (never reached: the test reads the redirect)
TIME_CALL = ("time__get_current_time", {"timezone": "UTC"})


class Memory:
    """The agent's token storage (the SDK's TokenStorage)."""

    def __init__(self):
        self.tokens = self.client = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client

    async def set_client_info(self, client):
        self.client = client


class Agent:
    """An agent with the SDK's OAuth client provider; its person's browser (signed in, or not) answers the
    consent page as `decision` says, and the agent reads the code from where its browser was sent back."""

    def __init__(self, base: str, person: Browsing | str, decision: str = "approve", document: str | None = None):
        """`person`: signed in already, or the name of one whose browser signs in when the agent sends it;
        `document`: the URL of the agent's client metadata document (its client_id), else it registers."""
        self.base, self.person, self.decision = base, person, decision
        self.storage, self.consents, self._url = Memory(), [], ""
        self.provider = OAuthClientProvider(
            f"{base}/mcp", OAuthClientMetadata(redirect_uris=[REDIRECT], client_name="an SDK agent",
                                               grant_types=["authorization_code", "refresh_token"],
                                               response_types=["code"], token_endpoint_auth_method="none"),
            self.storage, redirect_handler=self._open, callback_handler=self._answered, client_metadata_url=document)

    async def _open(self, url: str) -> None:
        self._url = url

    async def _answered(self) -> AuthorizationCodeResult:
        parts = urlsplit(self._url)
        assert f"{parts.scheme}://{parts.netloc}" == self.base, self._url
        if isinstance(self.person, str):
            self.person = self._signed_in_on_the_way(self.person, f"{parts.path}?{parts.query}")
        page = self.person.request("GET", f"{parts.path}?{parts.query}")
        assert page.status_code == 200 and "an SDK agent" in page.text, page.text[:500]
        ask = page.text.split('name="ask" value="', 1)[1].split('"', 1)[0]
        answer = self.person.request("POST", "/oauth/authorize", data={"ask": ask, "decision": self.decision})
        assert answer.status_code == 302, answer.text[:500]
        back = answer.headers["location"]
        self.consents.append(back)
        assert back.startswith(REDIRECT + "?"), back
        found = {k: v[0] for k, v in parse_qs(urlsplit(back).query).items()}
        return AuthorizationCodeResult(code=found.get("code", ""), state=found.get("state"), iss=found.get("iss"))

    def _signed_in_on_the_way(self, person: str, asked: str) -> Browsing:
        """A browser with no session opens the request: sent to sign in at the provider, and back to it."""
        browser = Browsing.__new__(Browsing)
        browser.base, browser.person, browser.client = self.base, person, httpx.Client(timeout=30)
        first = browser.client.get(self.base + asked, headers={"Accept": "text/html"})
        assert first.status_code == 302 and first.headers["location"].startswith("/login?next="), first.headers
        callback, binding = through_provider(browser.client, self.base, person, first.headers["location"])
        answer = browser.client.get(callback, headers={"Cookie": f"switchboard_signin={binding}"})
        assert answer.status_code == 302 and answer.headers.get("location") == asked, (answer.status_code, answer.headers.get("location"), asked, answer.text[:300])
        browser.session = answer.cookies.get("switchboard_session")
        return browser

    def call(self, name: str, arguments: dict) -> str:
        async def run():
            http = httpx2.AsyncClient(auth=self.provider, timeout=60)
            async with Client(streamable_http_client(f"{self.base}/mcp", http_client=http)) as client:
                result = await client.call_tool(name, arguments)
                return "\n".join(part.text for part in result.content)
        return asyncio.run(run())


def _ping(base: str, token: str) -> httpx.Response:
    return httpx.post(f"{base}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, timeout=30,
                      headers={"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream",
                               "MCP-Protocol-Version": "2025-11-25"})


def test_the_sdks_oauth_client_signs_in_calls_refreshes_and_is_refused_after_revoke(oauth_office, clean_redis):
    base = oauth_office["base"]
    bob = Browsing(base, "bob")
    agent = Agent(base, bob)

    # no key at all: discovery, registration, bob's sign-in and consent, then the call
    assert "UTC" in agent.call(*TIME_CALL)
    assert len(agent.consents) == 1 and agent.storage.client.client_id.startswith("sbc-")
    first = agent.storage.tokens
    assert first.refresh_token and first.expires_in == TOKEN_SECONDS

    # the access token is the gateway's only: the chat API refuses it
    chat = httpx.post(f"{base}/v1/chat/completions", headers={"Authorization": f"Bearer {first.access_token}"},
                      json={"model": "echo", "messages": [{"role": "user", "content": "hi"}]}, timeout=30)
    assert chat.status_code == 401 and "/mcp" in chat.text, chat.text

    # once it ends, the SDK refreshes it (no second consent) and the old refresh token is spent
    wait_until(lambda: _ping(base, first.access_token).status_code == 401, timeout=TOKEN_SECONDS + 30)
    assert "UTC" in agent.call(*TIME_CALL)
    second = agent.storage.tokens
    assert len(agent.consents) == 1 and second.access_token != first.access_token
    assert second.refresh_token != first.refresh_token
    reused = httpx.post(f"{base}/auth/token", data={"grant_type": "refresh_token", "refresh_token": first.refresh_token,
                                                    "client_id": agent.storage.client.client_id}, timeout=30)
    assert reused.status_code == 400 and reused.json()["error"] == "invalid_grant", reused.text

    # an admin revokes everything bob holds: the agent's access and refresh tokens end with the rest
    alice = Browsing(base, "alice")
    assert alice.request("POST", "/admin/people/bob/revoke").status_code == 200
    assert _ping(base, second.access_token).status_code == 401
    refreshed = httpx.post(f"{base}/auth/token", data={"grant_type": "refresh_token",
                                                       "refresh_token": second.refresh_token,
                                                       "client_id": agent.storage.client.client_id}, timeout=30)
    assert refreshed.status_code == 400 and refreshed.json()["error"] == "invalid_grant", refreshed.text


def test_a_request_without_a_credential_is_told_where_to_get_one(oauth_office, clean_redis):
    base = oauth_office["base"]
    for path in ("/mcp", "/mcp/time"):
        answer = httpx.post(f"{base}{path}", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, timeout=30)
        assert answer.status_code == 401
        challenge = answer.headers["www-authenticate"]
        assert challenge.startswith("Bearer ") and \
            f'resource_metadata="{base}/.well-known/oauth-protected-resource{path}"' in challenge, challenge
        metadata = httpx.get(f"{base}/.well-known/oauth-protected-resource{path}", timeout=30).json()
        assert metadata["resource"] == f"{base}{path}" and metadata["authorization_servers"] == [base]
    server = httpx.get(f"{base}/.well-known/oauth-authorization-server", timeout=30).json()
    assert server["issuer"] == base and server["code_challenge_methods_supported"] == ["S256"]
    assert {"authorization_code", "refresh_token"} <= set(server["grant_types_supported"])
    assert server["registration_endpoint"] == f"{base}/oauth/register"
    assert httpx.get(f"{base}/.well-known/oauth-protected-resource/mcp/nosuch", timeout=30).status_code == 404
    # the chat API's 401 sends no OAuth client there
    chat = httpx.post(f"{base}/v1/chat/completions", json={"model": "echo", "messages": []}, timeout=30)
    assert chat.status_code == 401 and "www-authenticate" not in chat.headers


def test_a_person_who_denies_gives_the_agent_nothing(oauth_office, clean_redis):
    base = oauth_office["base"]
    agent = Agent(base, Browsing(base, "carol"), decision="deny")
    with pytest.raises(Exception):
        agent.call(*TIME_CALL)
    assert "error=access_denied" in agent.consents[0] and agent.storage.tokens is None


def test_a_person_the_provider_stops_answering_for_loses_their_agents_tokens(oauth_office, clean_redis,
                                                                             redis_client):
    base, people = oauth_office["base"], oauth_office["people"]
    agent = Agent(base, "carol")  # (not signed in: the agent's request sends her to sign in first)
    assert "UTC" in agent.call(*TIME_CALL)
    tokens, client_id = agent.storage.tokens, agent.storage.client.client_id
    write_people(people, disabled=("carol",))
    try:  # the recheck (every 2 s here) suspends her: her agent's access token is refused, and its refresh
        wait_until(lambda: redis_client.exists(signin_suspended_key("carol")), timeout=60, what="her suspension")
        assert _ping(base, tokens.access_token).status_code == 401
        refreshed = httpx.post(f"{base}/auth/token", data={"grant_type": "refresh_token", "client_id": client_id,
                                                           "refresh_token": tokens.refresh_token}, timeout=30)
        assert refreshed.status_code == 400 and refreshed.json()["error"] == "invalid_grant", refreshed.text
    finally:
        write_people(people)


def test_an_agent_known_by_its_client_metadata_document_needs_no_registration(oauth_office, clean_redis):
    base, documents = oauth_office["base"], oauth_office["documents"]
    url = f"{documents.url}/agents/sdk.json"
    documents.documents["/agents/sdk.json"] = {
        "client_id": url, "client_name": "an SDK agent", "redirect_uris": [REDIRECT],
        "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
        "token_endpoint_auth_method": "none"}
    agent = Agent(base, Browsing(base, "bob"), document=url)
    assert "UTC" in agent.call(*TIME_CALL)
    assert agent.storage.client.client_id == url and len(agent.consents) == 1


def logged_in(login: subprocess.Popen, person: Browsing) -> None:
    """An agent's `mcp login ... --no-browser`: the URL it prints opened by the person's browser, consented to,
    and the URL their browser was sent back to pasted into it; it ends well."""
    try:
        seen = ""
        while "/oauth/authorize?" not in seen:
            line = login.stdout.readline()
            assert line, seen
            seen += line
        url = next(word for word in seen.split() if "/oauth/authorize?" in word)
        parts = urlsplit(url)
        page = person.request("GET", f"{parts.path}?{parts.query}")
        assert page.status_code == 200, (url, page.text.split('id="message"', 1)[-1][:400])
        ask = page.text.split('name="ask" value="', 1)[1].split('"', 1)[0]
        back = person.request("POST", "/oauth/authorize", data={"ask": ask, "decision": "approve"})
        login.stdin.write(back.headers["location"] + "\n")
        login.stdin.flush()
        rest, _ = login.communicate(timeout=60)
    finally:
        if login.poll() is None:
            login.kill()
    assert login.returncode == 0, seen + rest


def logged_in_on_a_terminal(argv: list[str], env: dict, cwd, person: Browsing) -> None:
    """As logged_in, for an agent that asks for the pasted URL only on a terminal: a pseudo-terminal (wide, so
    that nothing wraps the URL), read and written as a person at it would."""
    import fcntl
    import pty
    import re
    import select
    import struct
    import termios
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 2000, 0, 0))
    login = subprocess.Popen(argv, env=env | {"TERM": "xterm"}, cwd=cwd, stdin=slave, stdout=slave, stderr=slave,
                             start_new_session=True)
    os.close(slave)
    seen, answered, deadline = "", False, time.monotonic() + 90

    def read() -> str:
        ready, _, _ = select.select([master], [], [], 0.5)
        try:
            return os.read(master, 65536).decode(errors="replace") if ready else ""
        except OSError:  # (the terminal's other end closed: the agent ended)
            return ""
    try:
        while login.poll() is None and time.monotonic() < deadline:
            seen += read()
            plain = re.sub(r"\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b\[[0-9;?]*[A-Za-z]", "", seen)  # (links, colours)
            found = re.search(r"https?://[^\s\x00-\x1f\x7f]+/oauth/authorize\?[^\s\x00-\x1f\x7f]+", plain)
            if found and not answered:
                parts = urlsplit(found.group(0))
                page = person.request("GET", f"{parts.path}?{parts.query}")
                assert page.status_code == 200, (found.group(0), page.text.split('id="message"', 1)[-1][:400])
                ask = page.text.split('name="ask" value="', 1)[1].split('"', 1)[0]
                back = person.request("POST", "/oauth/authorize", data={"ask": ask, "decision": "approve"})
                os.write(master, (back.headers["location"] + "\r").encode())
                answered = True
        seen += read()
    finally:
        if login.poll() is None:
            login.kill()
        login.wait()
        os.close(master)
    assert answered and login.returncode == 0, seen[-3000:]


def test_codex_logs_in_to_the_gateway_and_calls_a_tool_headless(oauth_office, clean_redis, tmp_path):
    """`codex mcp login office --no-browser`: Codex prints the authorization URL, the person's browser signs in
    and consents, and Codex is given the URL its browser was sent back to; then `codex exec` calls the tool."""
    base = oauth_office["base"]
    bob = Browsing(base, "bob")
    key = bob.request("POST", "/me/keys", json={"label": "codex's model calls", "days": 1}).json()["key"]
    home = tmp_path / "codex-home"
    home.mkdir()
    config = f'\n[mcp_servers.office]\nurl = "{base}/mcp"\n'
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "CODEX_HOME": str(home), "SWITCHBOARD_KEY": key}
    (home / "config.toml").write_text(
        f'model = "echo"\nmodel_provider = "switchboard"\nmcp_oauth_credentials_store = "file"\n\n'
        f'[model_providers.switchboard]\nname = "Switchboard"\nbase_url = "{base}/v1"\nwire_api = "responses"\n'
        f'env_key = "SWITCHBOARD_KEY"\n{config}')
    # (its client metadata document is on chatgpt.com, which this machine cannot reach: it registers instead)
    login = subprocess.Popen(["node", str(PINNED), "mcp", "login", "office", "--no-browser",
                              "--oauth-client-registration", "dcr"], env=env, cwd=tmp_path, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    logged_in(login, bob)
    run = subprocess.run(["node", str(PINNED), "exec", "--skip-git-repo-check",
                          '<invoke name="time__get_current_time"><parameter name="timezone">UTC</parameter></invoke>'],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert run.returncode == 0 and '"datetime"' in run.stdout, run.stdout + run.stderr  # mcp-server-time's result
    assert "bearer" not in (home / "config.toml").read_text().lower()  # (no key of the gateway's anywhere)


def test_claude_code_logs_in_to_the_gateway_and_calls_a_tool_headless(oauth_office, clean_redis, tmp_path):
    """`claude mcp add --transport http office <url>` with no key, then `claude mcp login office --no-browser`
    (the same paste-back as Codex's), then `claude -p` calls the tool with the token it holds. Its client
    metadata document is on claude.ai, which this machine cannot reach: on the server that fetches none
    (SWITCHBOARD_AGENT_METADATA_DOCUMENTS=false) it registers."""
    base = oauth_office["closed"]
    bob = Browsing(base, "bob")
    key = bob.request("POST", "/me/keys", json={"label": "claude's model calls", "days": 1}).json()["key"]
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home"), "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
           "DISABLE_AUTOUPDATER": "1"}
    added = subprocess.run([str(CLAUDE), "mcp", "add", "--transport", "http", "--scope", "user", "office",
                            f"{base}/mcp"], env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert added.returncode == 0, added.stdout + added.stderr
    logged_in_on_a_terminal([str(CLAUDE), "mcp", "login", "office", "--no-browser"], env, tmp_path, bob)
    tool = "mcp__office__time__get_current_time"
    answer = claude(base, f'<invoke name="{tool}"><parameter name="timezone">UTC</parameter></invoke>', tmp_path,
                    "--allowedTools", tool, key=key, ENABLE_TOOL_SEARCH="false")
    assert '"datetime"' in answer, answer  # mcp-server-time's result


def test_a_server_that_fetches_no_documents_does_not_offer_them(oauth_office, clean_redis):
    closed, documents = oauth_office["closed"], oauth_office["documents"]
    assert httpx.get(f"{closed}/.well-known/oauth-authorization-server", timeout=30).json()[
        "client_id_metadata_document_supported"] is False
    url = f"{documents.url}/agents/sdk.json"
    documents.documents["/agents/sdk.json"] = {"client_id": url, "client_name": "an SDK agent",
                                               "redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none"}
    agent = Agent(closed, Browsing(closed, "bob"), document=url)  # it offers one; the server has it register
    assert "UTC" in agent.call(*TIME_CALL)
    assert agent.storage.client.client_id.startswith("sbc-")


def test_an_agent_over_its_persons_bound_keeps_its_refresh_token(oauth_office, clean_redis, redis_client):
    """A refresh refused for too many keys from one person (429) spends nothing: it works once the window ends."""
    base = oauth_office["base"]
    agent = Agent(base, Browsing(base, "bob"))
    assert "UTC" in agent.call(*TIME_CALL)
    form = {"grant_type": "refresh_token", "refresh_token": agent.storage.tokens.refresh_token,
            "client_id": agent.storage.client.client_id}
    redis_client.set(signin_throttle_key("keys from a login", "bob"), 10_000, ex=600)  # (the bound reached)
    refused = httpx.post(f"{base}/auth/token", data=form, timeout=30)
    assert refused.status_code == 429 and refused.json()["error"] == "slow_down", refused.text
    redis_client.delete(signin_throttle_key("keys from a login", "bob"))  # (the window ended)
    refreshed = httpx.post(f"{base}/auth/token", data=form, timeout=30)
    assert refreshed.status_code == 200 and refreshed.json()["refresh_token"] != form["refresh_token"], refreshed.text


def test_gemini_cli_signs_in_to_the_gateway_headless_and_calls_a_tool(oauth_office, clean_redis, browser, tmp_path):
    """Gemini CLI (`gemini -p`, no key for /mcp, `oauth.enabled` on the server): the gateway's 401 starts its own
    OAuth (discovery, registration, a loopback listener); it asks for consent on its input, hands the URL to the
    desktop's browser opener, and waits for the browser to come back to its listener; then it calls the tool.
    The person's browser is chromium: signed in, it shows the consent page, and its Approve sends it on to the
    agent's listener."""
    import threading

    from selenium.webdriver.common.by import By

    from catalog import agent_setups
    from tests.integration.test_gemini_cli import GEMINI
    from tests.integration.test_signin import sign_in_in_browser
    base = oauth_office["base"]
    bob = Browsing(base, "bob")
    browser.execute_cdp_cmd("Network.clearBrowserCookies", {})
    sign_in_in_browser(browser, base, "bob", "/me")
    key = bob.request("POST", "/me/keys", json={"label": "gemini's model calls", "days": 1}).json()["key"]
    home = tmp_path / "home"
    setup = agent_setups.Setup(server=base, models=(agent_setups.Model("echo", 131072, 8192),), model="echo",
                               small_model="echo", key=key)
    outputs = agent_setups.build("gemini-cli", setup)
    (home / ".gemini").mkdir(parents=True)
    settings = json.loads(outputs[0].text) | {"mcpServers": {"office": {"httpUrl": f"{base}/mcp",
                                                                               "oauth": {"enabled": True}}}}
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
    # the desktop's browser opener it calls (xdg-open): here it hands the URL to the person's browser, the test
    opener, opened = tmp_path / "bin", tmp_path / "opened-url"
    opener.mkdir()
    (opener / "xdg-open").write_text(f'#!/bin/sh\nprintf %s "$1" > {opened}\n')
    (opener / "xdg-open").chmod(0o755)
    env = {"PATH": f'{opener}:{os.environ["PATH"]}', "HOME": str(home), "NO_COLOR": "1",
           "GEMINI_CLI_TRUST_WORKSPACE": "true", **outputs[1].variables}
    prompt = '<invoke name="mcp_office_time__get_current_time"><parameter name="timezone">UTC</parameter></invoke>'
    run = subprocess.Popen([str(GEMINI), "-p", prompt, "--yolo"], cwd=tmp_path, env=env, stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen: list[str] = []
    reader = threading.Thread(target=lambda: seen.extend(iter(lambda: run.stdout.read(1), "")), daemon=True)
    reader.start()
    try:
        wait_until(lambda: "[Y/n]" in "".join(seen) or run.poll() is not None, timeout=90, what="its consent prompt")
        assert run.poll() is None, "".join(seen)
        run.stdin.write("y\n")
        run.stdin.flush()
        try:
            wait_until(lambda: opened.exists() and opened.read_text().strip(), timeout=60,
                       what="the authorization URL handed to the browser")
        except AssertionError:
            raise AssertionError("".join(seen)[-3000:]) from None
        browser.get(opened.read_text().strip())
        approve = wait_until(lambda: browser.find_elements(By.ID, "approve"), what="the consent page")[0]
        assert "gemini" in browser.page_source.lower(), browser.page_source[-1000:]  # (the agent, by its name)
        approve.click()
        wait_until(lambda: urlsplit(browser.current_url).hostname in ("localhost", "127.0.0.1") and
                   urlsplit(browser.current_url).port != urlsplit(base).port, what="back at the agent's listener")
        run.wait(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    reader.join(timeout=10)
    output = "".join(seen)
    assert run.returncode == 0 and '"timezone": "UTC"' in output, output[-3000:]
