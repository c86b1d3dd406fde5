"""A person's side of signing in with Switchboard from a command line:
`python scripts/admin.py login --url URL` (the OAuth device authorization
grant: open the page it shows, sign in with the office's provider, approve
the code) and `python scripts/admin.py token [--url URL]`, which prints a
key valid for a bounded time (SWITCHBOARD_SIGNIN_TOKEN_SECONDS on the
server, an hour by default), minting a new one when the one it holds is
about to end. Agents that run a helper call `token` (Claude Code's
`apiKeyHelper`, Codex's provider `auth.command`); programs on the official
SDKs pass the functions at the end of this module as their credentials.

What it keeps, under $XDG_CONFIG_HOME/switchboard (~/.config/switchboard),
readable by its person only (the folder 0700, the file 0600): per server,
the login's refresh token (Switchboard's own, not the provider's) and the
current key with its end. Nothing else is written anywhere, and nothing
printed but the key (`token`) or the page and code to approve (`login`).
"""
from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import httpx

DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
FILE_NAME = "credentials.json"
TIMEOUT = httpx.Timeout(15.0)


class CredentialsError(Exception):
    """What the person should do; never a key or a token."""


def folder() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "switchboard"


@contextmanager
def _held():
    """The credentials file, read and written under a lock (helpers run side by side)."""
    home = folder()
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(home, 0o700)
    with open(home / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        path = home / FILE_NAME
        saved = json.loads(path.read_text()) if path.exists() else {}
        yield saved
        draft = home / f".{FILE_NAME}.{os.getpid()}"
        with os.fdopen(os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as file:
            json.dump(saved, file, indent=2)
        os.replace(draft, path)


def _server(url: str | None, saved: dict) -> str:
    if url:
        return url.rstrip("/")
    if len(saved.get("servers", {})) == 1:
        return next(iter(saved["servers"]))
    raise CredentialsError("which server? pass --url (you are logged in to "
                           f"{len(saved.get('servers', {}))} servers)" if saved.get("servers") else
                           "not logged in: run python scripts/admin.py login --url <server>")


def _post(url: str, form: dict) -> tuple[int, dict]:
    try:
        response = httpx.post(url, data=form, timeout=TIMEOUT)
    except httpx.HTTPError as error:
        raise CredentialsError(f"the server at {url} cannot be reached ({type(error).__name__})") from None
    try:
        return response.status_code, response.json()
    except ValueError:
        raise CredentialsError(f"the server at {url} answered {response.status_code}, not JSON") from None


# --- logging in ----------------------------------------------------------------------------------------
def login(url: str, say=print, sleep=time.sleep) -> str:
    """Log in to the server at `url` (the person approves in a browser); their name."""
    url = url.rstrip("/")
    status, started = _post(f"{url}/auth/device", {"client_id": "switchboard-cli",
                                                   "label": f"scripts/admin.py on {socket.gethostname()}"})
    if status != 200:
        raise CredentialsError(f"the server refused a login: {started.get('error', {}).get('message', started)}")
    say(f"Open {started['verification_uri_complete']}\nand sign in, then approve the code {started['user_code']}.")
    interval, deadline = started.get("interval", 5), time.monotonic() + started.get("expires_in", 600)
    while time.monotonic() < deadline:
        sleep(interval)
        status, answer = _post(f"{url}/auth/token", {"grant_type": DEVICE_GRANT,
                                                      "device_code": started["device_code"]})
        if status == 200:
            _keep(url, answer)
            return answer["person"]
        if answer.get("error") == "slow_down":
            interval += 1
        elif answer.get("error") != "authorization_pending":
            raise CredentialsError(f"the login ended: {answer.get('error_description') or answer.get('error')}")
    raise CredentialsError("the code was not approved in time: run the login again")


def _keep(url: str, answer: dict) -> None:
    with _held() as saved:
        server = saved.setdefault("servers", {}).setdefault(url, {})
        if answer.get("refresh_token"):
            server["refresh_token"] = answer["refresh_token"]
        server.update(person=answer.get("person"), key=answer["access_token"], key_expires=answer["expires_at"],
                      key_seconds=answer["expires_in"])


# --- a key, now ---------------------------------------------------------------------------------------
def key(url: str | None = None) -> str:
    """A key of the person's for the server, valid for a while yet."""
    with _held() as saved:
        server_url = _server(url, saved)
        server = saved.get("servers", {}).get(server_url)
        if not server or not server.get("refresh_token"):
            raise CredentialsError(f"not logged in to {server_url}: run python scripts/admin.py login --url "
                                   f"{server_url}")
        if server.get("key") and _left(server) > 0:
            return server["key"]
        status, answer = _post(f"{server_url}/auth/token", {"grant_type": "refresh_token",
                                                             "refresh_token": server["refresh_token"]})
        if status != 200:
            raise CredentialsError(f"{server_url} refused your login ({answer.get('error_description') or status}):"
                                   f" run python scripts/admin.py login --url {server_url}")
        server.update(key=answer["access_token"], key_expires=answer["expires_at"], key_seconds=answer["expires_in"],
                      person=answer.get("person"))
        return server["key"]


def _left(server: dict) -> float:
    """Seconds the held key has left, less a margin (a tenth of its life, at most a minute) so that
    a client is never handed a key that ends as it uses it."""
    margin = min(60.0, float(server.get("key_seconds", 600)) / 10)
    return float(server.get("key_expires", 0)) - time.time() - margin


def key_expires(url: str | None = None) -> float:
    with _held() as saved:
        return float(saved.get("servers", {}).get(_server(url, saved), {}).get("key_expires", 0))


# --- for programs on the official SDKs -----------------------------------------------------------------
def openai_api_key(url: str | None = None):
    """`OpenAI(base_url=..., api_key=openai_api_key(server))`: the SDK asks it before its requests."""
    return lambda: key(url)


def anthropic_credentials(url: str | None = None):
    """`Anthropic(base_url=..., credentials=anthropic_credentials(server))`: the SDK caches the key to
    its end and asks again after it (or after a 401)."""
    from anthropic.lib.credentials import AccessToken

    def provide(*, force_refresh: bool = False) -> AccessToken:
        if force_refresh:
            _forget_key(url)
        found = key(url)
        return AccessToken(found, int(key_expires(url)) - 60)
    return provide


def _forget_key(url: str | None) -> None:
    with _held() as saved:
        saved.get("servers", {}).get(_server(url, saved), {}).pop("key", None)


# --- the command line (scripts/admin.py login | token) ------------------------------------------------------
def add_commands(commands) -> None:
    """The person's commands, on scripts/admin.py's subcommand parser."""
    start = commands.add_parser("login", help="log in to a server with your office sign-in (for `token`)")
    start.add_argument("--url", required=True, help="the server, e.g. https://switchboard.office")
    now = commands.add_parser("token", help="print a key of yours valid for a while yet (an agent's helper)")
    now.add_argument("--url", help="the server (default: the one you logged in to)")


def run(options) -> None:
    try:
        if options.command == "login":
            person = login(options.url, say=lambda text: print(text, file=sys.stderr, flush=True))
            print(f"logged in to {options.url.rstrip('/')} as {person}", file=sys.stderr)
        else:
            print(key(options.url))
    except CredentialsError as error:
        print(f"switchboard: {error}", file=sys.stderr)
        raise SystemExit(1) from None


def main(argv: list[str]) -> None:
    import argparse
    parser = argparse.ArgumentParser(prog="scripts/admin.py")
    add_commands(parser.add_subparsers(dest="command", required=True))
    run(parser.parse_args(argv))
