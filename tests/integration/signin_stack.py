"""The sign-in tests' office: a real OpenID provider (node-oidc-provider,
tests/agents/oidc_provider.mjs, on the Node 22 of tests/agents) with two
people, alice in the admin group and bob not, and two web processes of a
Switchboard signing in with it (on the session's Redis and worker, so the
echo model answers their keys)."""
from __future__ import annotations

import json
from pathlib import Path

from identity.keys import digest
from scripts.embedded_redis import free_port
from scripts.processes import ROOT, Process, ready_together, stack_env, start_web, wait_http_ready

AGENTS = ROOT / "tests" / "agents"
NODE = AGENTS / "node_modules" / "node" / "bin" / "node"
CLIENT_ID, CLIENT_SECRET = "switchboard", "switchboard-test-client-secret-5e1d"
ADMIN_GROUP = "switchboard-admins"
OPS_KEY = "ops-file-key-91c2"  # a keys-file key with admin = true: services and CI keep working beside sign-in
PEOPLE = {"alice": {"name": "Alice", "email": "alice@example.org", "groups": [ADMIN_GROUP, "staff"]},
          "bob": {"name": "Bob", "email": "bob@example.org", "groups": ["staff"]},
          "carol": {"name": "Carol", "email": "carol@example.org", "groups": ["staff"]}}
TOKEN_SECONDS = 8  # a helper's key: short, so that a test sees it end and a new one taken
RECHECK_SECONDS = 2  # how often each person is asked about again: a disabled one is stopped this soon


def write_people(path: Path, disabled: tuple[str, ...] = ()) -> None:
    path.write_text(json.dumps({name: info | {"disabled": name in disabled} for name, info in PEOPLE.items()}))


def client(redirect_uris: list[str], client_id: str = CLIENT_ID, refresh: bool = True) -> dict:
    """A client registered at the provider (`refresh`: it is given refresh tokens)."""
    return {"client_id": client_id, "client_secret": CLIENT_SECRET, "redirect_uris": redirect_uris,
            "grant_types": ["authorization_code", "refresh_token"] if refresh else ["authorization_code"],
            "response_types": ["code"]}


def start_provider(port: int, people: Path, redirect_uris: list[str], clients: list[dict] | None = None,
                   resource: dict | None = None) -> Process:
    """`resource`: it is also the authorization server of an MCP server (oidc_provider.mjs's RESOURCE_JSON)."""
    assert NODE.exists(), f"{NODE} is missing: run `make install-dev`"
    clients = clients or [client(redirect_uris)]
    provider = Process("oidc-provider", [str(NODE), str(AGENTS / "oidc_provider.mjs"), str(port), str(people),
                                         json.dumps(clients), *([json.dumps(resource)] if resource else [])],
                       {"PATH": "/usr/bin:/bin"}, AGENTS)
    wait_http_ready(provider, f"http://127.0.0.1:{port}/.well-known/openid-configuration")
    return provider


def keys_text() -> str:
    return (f'[keys.ops]\nsha256 = "{digest(OPS_KEY)}"\nadmin = true\n\n'
            '[signin]\nmodels = ["echo*"]\nmax_concurrent = 2\n\n'
            '[signin.groups.switchboard-admins]\nmodels = ["*"]\nmax_concurrent = 4\n')


def start_signin_stack(redis_url: str, folder: Path, **extra_env: str) -> dict:
    """The provider and two web processes (with `extra_env`); what the tests need to reach them."""
    people, keys_file = folder / "people.json", folder / "keys.toml"
    write_people(people)
    keys_file.write_text(keys_text())
    provider_port, ports = free_port(), [free_port(), free_port()]
    bases = [f"http://127.0.0.1:{port}" for port in ports]
    provider = start_provider(provider_port, people, [f"{base}/login/callback" for base in bases])
    env = stack_env(redis_url, SWITCHBOARD_KEYS_FILE=str(keys_file),
                    SWITCHBOARD_OIDC_ISSUER=f"http://127.0.0.1:{provider_port}", SWITCHBOARD_OIDC_CLIENT_ID=CLIENT_ID,
                    SWITCHBOARD_OIDC_CLIENT_SECRET=CLIENT_SECRET, SWITCHBOARD_OIDC_ADMIN_GROUPS=ADMIN_GROUP,
                    SWITCHBOARD_OIDC_SCOPES="openid profile email offline_access groups",
                    SWITCHBOARD_SIGNIN_TOKEN_SECONDS=str(TOKEN_SECONDS),
                    SWITCHBOARD_SIGNIN_RECHECK_SECONDS=str(RECHECK_SECONDS), **extra_env)
    webs = []
    try:
        for port in ports:
            webs.append(start_web(env, wait=False, port=port)[0])
        ready_together(webs)
    except BaseException:
        provider.stop()
        raise
    return {"bases": bases, "provider": provider, "webs": webs, "people": people, "keys_file": keys_file,
            "issuer": f"http://127.0.0.1:{provider_port}"}


def through_provider(client, base: str, person: str, start: str = "/login?next=/me") -> tuple[str, str]:
    """A sign-in as a browser makes it, on an httpx client: to the
    provider, through its login form as `person`, and back: the URL of
    Switchboard's callback (the provider's code and our state), not yet
    opened, and the value of the cookie that binds the sign-in to its
    browser. (Our cookies are Secure: a browser sends them to 127.0.0.1,
    httpx over http only when given them.)"""
    first = client.get(base + start)
    return signed_in_at_provider(client, str(first.headers["location"]), base, person), \
        first.cookies.get("switchboard_signin", "")


def signed_in_at_provider(client, url: str, base: str, person: str) -> str:
    """From `url` at a provider, through its login form as `person`, to where it sends the browser back
    under `base` (not opened)."""
    for _ in range(20):
        if url.startswith(base):
            return url
        response = client.get(url)
        if response.status_code == 200 and 'name="login"' in response.text:
            action = response.text.split('action="', 1)[1].split('"', 1)[0]
            response = client.post(action, data={"prompt": "login", "login": person, "password": "any"})
        assert "location" in response.headers, (response.status_code, response.text[:500])
        url = str(response.url.join(response.headers["location"]))
    raise AssertionError(f"the provider did not send {person} back to {base}")


class Browsing:
    """A person signed in, as their browser's requests carry the session."""

    def __init__(self, base: str, person: str):
        import httpx
        self.base, self.person, self.client = base, person, httpx.Client(timeout=30)
        callback, binding = through_provider(self.client, base, person)
        answer = self.client.get(callback, headers={"Cookie": f"switchboard_signin={binding}"})
        self.session = answer.cookies.get("switchboard_session")
        assert answer.status_code == 302 and self.session, answer.text

    def request(self, method: str, path: str, base: str | None = None, **options):
        headers = {"Cookie": f"switchboard_session={self.session}", "Origin": base or self.base} | \
            options.pop("headers", {})
        return self.client.request(method, (base or self.base) + path, headers=headers, **options)
