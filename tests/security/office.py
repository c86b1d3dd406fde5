"""The hostile tester's office: a real OpenID provider (node-oidc-provider)
with people of its own, and two web processes of a Switchboard signing in
with it, on the session's Redis and worker:

- "front" signs in with a client the provider gives refresh tokens, stands
  behind a trusted reverse proxy (SWITCHBOARD_TRUSTED_PROXIES=127.0.0.1, as
  the tests' own requests come), and writes gunicorn's access log to a file;
- "plain" trusts no proxy.

The provider gives no refresh token to an account marked `no_refresh`.

Its keys file has an admin key named `ops` that keeps request bodies, and
a sign-in policy with a group table (`ml-team`) that widens the models.
"""
from __future__ import annotations

import json
import uuid
from pathlib import Path

import httpx

from identity.keys import digest
from scripts.embedded_redis import free_port
from scripts.processes import ready_together, stack_env, start_web, stop_together
from tests.integration.waits import wait_until
from tests.integration.signin_stack import (
    ADMIN_GROUP, CLIENT_ID, CLIENT_SECRET, Browsing, start_provider, through_provider,
)

OPS_KEY = "ops-admin-key-5c0f9e"
RECHECK_SECONDS = 2
PEOPLE = {"alice": {"name": "Alice", "groups": [ADMIN_GROUP]},
          "bob": {"name": "Bob", "groups": ["staff"]},
          "carol": {"name": "Carol", "groups": ["staff"]},
          "ops": {"name": "Someone whose username is ops", "groups": ["staff"]},
          "dave": {"name": "Dave", "groups": ["staff"]}}


def write_people(path: Path, changes: dict | None = None) -> None:
    """The provider's accounts (by `sub`), with `changes` to some of them (None: an account deleted)."""
    people = {sub: info | {"email": f"{sub}@example.org"} for sub, info in PEOPLE.items()}
    for sub, change in (changes or {}).items():
        if change is None:
            people.pop(sub, None)
        else:
            people[sub] = people.get(sub, {"name": sub, "email": f"{sub}@example.org"}) | change
    path.write_text(json.dumps(people))


def keys_text(signin: str = 'models = ["echo"]\nmcp_servers = ["time"]\nrequests_per_minute = 500\n',
              groups: str = '[signin.groups.ml-team]\nmodels = ["echo*"]\n') -> str:
    return (f'[keys.ops]\nsha256 = "{digest(OPS_KEY)}"\nadmin = true\nlog_bodies = true\n\n'
            f"[signin]\n{signin}\n{groups}")


def apply_keys(office: dict, text: str) -> None:
    """Write the keys file and wait until the web processes read it (a key of its own says so)."""
    marker = f"marker-{uuid.uuid4().hex}"
    office["keys_file"].write_text(text + f'\n[keys.marker]\nsha256 = "{digest(marker)}"\n')
    for base in (office["front"], office["plain"]):
        wait_until(lambda: httpx.get(f"{base}/api/tags", headers=as_key(marker)).status_code == 200,
                   what="the keys file read again")


def start_office(redis_url: str, folder: Path) -> dict:
    people, keys_file, access_log = folder / "people.json", folder / "keys.toml", folder / "access.log"
    write_people(people)
    keys_file.write_text(keys_text())
    provider_port, front_port, plain_port = free_port(), free_port(), free_port()
    front, plain = f"http://127.0.0.1:{front_port}", f"http://127.0.0.1:{plain_port}"
    provider = start_provider(provider_port, people, [f"{front}/login/callback", f"{plain}/login/callback"])
    issuer = f"http://127.0.0.1:{provider_port}"
    common = dict(SWITCHBOARD_OIDC_CLIENT_ID=CLIENT_ID, SWITCHBOARD_KEYS_FILE=str(keys_file),
                  SWITCHBOARD_OIDC_ISSUER=issuer,
                  SWITCHBOARD_OIDC_CLIENT_SECRET=CLIENT_SECRET, SWITCHBOARD_OIDC_ADMIN_GROUPS=ADMIN_GROUP,
                  SWITCHBOARD_OIDC_SCOPES="openid profile email offline_access groups",
                  SWITCHBOARD_SIGNIN_RECHECK_SECONDS=str(RECHECK_SECONDS))
    webs = []
    try:
        webs.append(start_web(stack_env(redis_url, SWITCHBOARD_TRUSTED_PROXIES="127.0.0.1/32", **common),
                              extra_args=("--access-logfile", str(access_log)), wait=False, port=front_port)[0])
        webs.append(start_web(stack_env(redis_url, **common),
                              wait=False, port=plain_port)[0])
        ready_together(webs)
    except BaseException:
        stop_together([*webs, provider])
        raise
    return {"front": front, "plain": plain, "provider": provider, "webs": webs, "people": people,
            "keys_file": keys_file, "access_log": access_log, "issuer": issuer}


def stop_office(office: dict) -> None:
    stop_together([*office["webs"], office["provider"]])


def signed_in(base: str, person: str) -> Browsing:
    return Browsing(base, person)


def sign_in_answer(base: str, person: str, start: str = "/login?next=/me") -> httpx.Response:
    """The callback's answer to a sign-in as a browser makes it (not followed)."""
    with httpx.Client(timeout=30) as browser:
        callback, binding = through_provider(browser, base, person, start)
        return browser.get(callback, headers={"Cookie": f"switchboard_signin={binding}"})


def as_key(key: str) -> dict:
    return {"Authorization": f"Bearer {key}"}


def chat(base: str, key: str, model: str = "echo", **headers: str) -> httpx.Response:
    return httpx.post(f"{base}/v1/chat/completions", headers=as_key(key) | headers, timeout=60,
                      json={"model": model, "messages": [{"role": "user", "content": "hello there"}]})
