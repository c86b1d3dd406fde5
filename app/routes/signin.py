"""Sign-in's pages and endpoints (identity/signin.py), for people and their tools:

- `GET /login?next=/admin`: off to the office's provider (404 while sign-in is off);
  `GET /login/callback`: its answer, checked, and a session; `POST /logout`.
- `GET /me`: a signed-in person's page; `GET /me.json` its data (their usage
  today, keys and logins); `POST /me/keys` (`{"label", "days", "models"}`)
  mints a key, shown once; `DELETE /me/keys/<id>` revokes it.
- The device authorization grant (RFC 8628) for `scripts/admin.py login`:
  `POST /auth/device`, the page a person approves it on (`/login/device`),
  and `POST /auth/token` (grant types `urn:ietf:params:oauth:grant-type:device_code`
  and `refresh_token`), whose access token is a key valid SIGNIN_TOKEN_SECONDS.

Pages answer with pages, endpoints with JSON (the token endpoint in OAuth's
error shape, RFC 6749 §5.2).
"""
from __future__ import annotations

import fnmatch
import re
from typing import Callable
from urllib.parse import quote, urlsplit

import gevent
from flask import Blueprint, Response, g, jsonify, redirect, request
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from app import boundary, pages, person_page
from app.auth import SessionCheck, public
from app.boundary import same_site_without_origin
from app.errors import ApiError, register_error_handlers
from app.services import services
from dialects.openai_writer import error_body
from identity import device_login, mcp_oauth, own_keys
from identity.keys import signed_in_name
from identity.people import ProviderUnavailable, SignInFailed
from identity.signin import FLOW_COOKIE, FLOW_SECONDS, RECHECK_LOOP_SECONDS, SESSION_COOKIE, NameTaken, Session, SignIn
from ledger import usage
from protocol import keys

bp = Blueprint("signin", __name__)
register_error_handlers(bp, error_body)
DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"


def _signin() -> SignIn:
    found = services().signin
    if found is None:
        raise ApiError(404, "sign-in is not configured on this server (SWITCHBOARD_OIDC_ISSUER)")
    return found


def public_root() -> str:
    return boundary.public_root(services().settings)


# Where a sign-in may go back to: a page of Switchboard's own. Its path only (no scheme, host or anything a
# browser would read as one), printable ASCII without whitespace or backslashes: browsers drop tabs and
# newlines and read `\` as `/`, so `/\t/evil.example` or `/\\evil.example` would leave for another origin.
NEXT_PAGE = re.compile(r"/(?![/\\])[\x21-\x7e]{0,2000}")  # (an agent's authorization request: a long query)
PAGES = ("/me", "/admin", "/login/device", "/oauth/authorize")


def _safe_next(value: str | None) -> str:
    """Where to go after signing in: one of this server's pages, else nowhere (`/me` or `/admin`)."""
    if not value or not NEXT_PAGE.fullmatch(value) or "\\" in value:
        return ""
    parts = urlsplit(value)
    if parts.scheme or parts.netloc or not parts.path.startswith(PAGES) or "//" in parts.path:
        return ""
    return value


def _cookie(response: Response, name: str, value: str, seconds: int, path: str = "/") -> Response:
    response.set_cookie(name, value, max_age=seconds, path=path, secure=True, httponly=True, samesite="Lax")
    return response


# How many of these one address (or one person) may start in THROTTLE_SECONDS: the public routes' bound
# (each start keeps a record in Redis for minutes), far above what a person or their agents do.
THROTTLE_SECONDS = 600
THROTTLES = {"sign-ins": 60, "device logins": 60, "keys from a login": 120, "user code guesses": 20,
             "agent registrations": 60, "account connections": 60}
MOST_CONSOLE_KEYS = 100  # a person's keys minted on /me at once


def _throttle(what: str, who: str, count: bool = True) -> None:
    """Refused once `who` has done `what` THROTTLES[what] times in the window (count=False: only looked at).
    `who` is an address (the client's, behind a trusted proxy: app/boundary.py) or a person, never a
    whole office's."""
    key = keys.signin_throttle_key(what, who)
    with services().redis.pipeline(transaction=False) as pipe:
        pipe.set(key, 0, ex=THROTTLE_SECONDS, nx=True)  # (the window starts with its first)
        pipe.incr(key, 1 if count else 0)
        _, done = pipe.execute()
    if done > THROTTLES[what]:
        raise ApiError(429, f"too many {what} from here: at most {THROTTLES[what]} in {THROTTLE_SECONDS // 60} "
                            "minutes", retry_after=int(services().redis.ttl(key)) or 1)


def _session() -> Session:
    session = g.get("session")
    if session is None:
        raise ApiError(401, "sign in first: open /login")
    return session


# --- signing in and out ------------------------------------------------------------------------------
@bp.get("/login")
@public
def login():
    signin = _signin()
    _throttle("sign-ins", request.remote_addr or "")
    try:
        url, binding = signin.begin(f"{public_root()}/login/callback", _safe_next(request.args.get("next")))
    except SignInFailed as failed:
        return pages.message("Sign-in is unavailable", str(failed), 502)
    return _cookie(redirect(url), FLOW_COOKIE, binding, FLOW_SECONDS, "/login")


@bp.get("/login/callback")
@public
def callback():
    signin = _signin()
    if request.args.get("error"):
        said = f'{request.args.get("error")[:100]}: {request.args.get("error_description", "")[:300]}'
        return pages.message("Sign-in refused", f"The identity provider refused the sign-in ({said}).", 403,
                             (("Try again", "/login"),))
    try:
        session_id, identity, going = signin.complete(request.args.get("state", ""), request.args.get("code", ""),
                                                      request.cookies.get(FLOW_COOKIE, ""))
    except ProviderUnavailable as failed:
        return pages.message("Sign-in is unavailable", str(failed), 502, (("Try again", "/login"),))
    except NameTaken as taken:
        return pages.message("This name is taken here", str(taken), 403)
    except SignInFailed as failed:
        return pages.message("Sign-in failed", str(failed), 400, (("Sign in again", "/login"),))
    response = redirect(_safe_next(going) or ("/admin" if identity.admin else "/me"))
    response.delete_cookie(FLOW_COOKIE, path="/login")
    return _cookie(response, SESSION_COOKIE, session_id, services().settings.signin_session_seconds)


@bp.post("/logout")
@public
def logout():
    _signin().end_session(request.cookies.get(SESSION_COOKIE))
    response = pages.message("Signed out", "You are signed out of Switchboard.", 200, (("Sign in again", "/login"),))
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


# --- a person's own page -----------------------------------------------------------------------------------
@bp.get("/me")
def me_page():
    _session()
    return pages.static("me.html")


@bp.get("/me.json")
def me():
    session, shared = _session(), services()
    holder, template = signed_in_name(session.person), shared.keys.policy.template(session.groups)
    today = usage.usage(shared.redis).get(holder, {})
    return jsonify({"person": session.person, "admin": session.admin, "groups": list(session.groups),
                    "usage": [{"model": model} | counts for model, counts in sorted(today.items())],
                    "keys": own_keys.of_person(shared.redis, session.person),
                    "logins": device_login.of_person(shared.redis, session.person),
                    "most_days": shared.settings.signin_key_days}
                   | person_page.offered(shared, template, holder, public_root()))


NO_REFRESH_TOKEN = ("the identity provider gave no refresh token at your sign-in, so the server could not ask it "
                    "later whether you are still there: no key or login can be made (the operator adds "
                    "offline_access to SWITCHBOARD_OIDC_SCOPES, or the provider's equivalent)")


class KeyRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    label: str = Field("key", min_length=1, max_length=100)
    days: int = Field(30, ge=1)
    models: list[str] | None = Field(None, min_length=1, max_length=100)


@bp.post("/me/keys")
def mint_key():
    session, shared, signin = _session(), services(), _signin()
    try:
        asked = KeyRequest.model_validate(request.get_json(silent=True) or {})
    except ValidationError as error:
        raise ApiError.from_validation(error) from None
    if asked.days > shared.settings.signin_key_days:
        raise ApiError(400, f"days: a key lives at most {shared.settings.signin_key_days} days here", "days")
    template = shared.keys.policy.template(session.groups)
    served = [entry.name for entry in shared.registry.entries()]
    refused = [m for m in asked.models or () if not all(template.allows(name) for name in fnmatch.filter(served, m))]
    if refused:
        raise ApiError(400, f"models: {refused[0]!r} names models your keys may not use", "models")
    if sum(key["source"] == "console" for key in own_keys.of_person(shared.redis, session.person)) \
            >= MOST_CONSOLE_KEYS:
        raise ApiError(400, f"you hold {MOST_CONSOLE_KEYS} keys made here already: revoke some first")
    if not signin.can_mint(session.person):
        raise ApiError(403, NO_REFRESH_TOKEN)
    minted = own_keys.mint(shared.redis, session.person, session.groups,
                           own_keys.Wanted(asked.label, asked.days * 86400, tuple(asked.models or ()) or None))
    signin.audit(f"{session.person} (signed in)", request.remote_addr or "", "key minted", session.person,
                 {k: minted.record[k] for k in ("id", "label", "source", "models", "expires")})
    return jsonify({"key": minted.key} | minted.record), 201


@bp.delete("/me/keys/<key_id>")
def revoke_key(key_id: str):
    session, shared = _session(), services()
    revoked = own_keys.revoke(shared.redis, session.person, key_id[:40])
    if revoked is None:
        raise ApiError(404, f"you hold no key {key_id[:40]!r}")
    _signin().audit(f"{session.person} (signed in)", request.remote_addr or "", "key revoked", session.person,
                    {"id": revoked["id"], "label": revoked["label"]})
    return jsonify(revoked)


# --- command-line logins (RFC 8628) ------------------------------------------------------------------------
@bp.post("/auth/device")
@public
def device_authorization():
    _signin()
    _throttle("device logins", request.remote_addr or "")
    label = request.form.get("label") or request.form.get("client_id") or "command line"
    started = device_login.start(services().redis, label)
    page = f"{public_root()}/login/device"
    return _oauth_json({"device_code": started.device_code, "user_code": started.user_code,
                        "verification_uri": page, "verification_uri_complete": f"{page}?user_code={started.user_code}",
                        "expires_in": started.expires_in, "interval": started.interval})


@bp.get("/login/device")
def device_page():
    session = _session()
    user_code = device_login.normal_user_code(request.args.get("user_code", "")) or \
        request.args.get("user_code", "")[:20]
    waiting = device_login.waiting(services().redis, user_code) if user_code else None
    if user_code and waiting is None:
        _throttle("user code guesses", session.person)
    return pages.device(session.person, user_code, waiting)


@bp.post("/login/device")
def device_decision():
    session, signin = _session(), _signin()
    approved = request.form.get("decision") == "approve"
    if approved and not signin.can_mint(session.person):
        return pages.message("Login not approved", NO_REFRESH_TOKEN, 403)
    _throttle("user code guesses", session.person, count=False)
    decided = device_login.decide(services().redis, request.form.get("user_code", ""), session.person,
                                  session.groups, approved)
    if decided is None:
        _throttle("user code guesses", session.person)
        return pages.message("No such login", "No login waits with that code (it expired or was answered already): "
                             "run the login again.", 404, (("Enter a code", "/login/device"),))
    if not approved:
        return pages.message("Login denied", "The tool was refused; nothing was given to it.")
    signin.audit(f"{session.person} (signed in)", request.remote_addr or "", "login approved", session.person,
                 {"tool": decided.get("label", "")})
    return pages.message("Login approved", "You are logged in there: go back to your terminal.")


@bp.post("/auth/token")
@public
def token():
    signin, shared = _signin(), services()
    grant, settings = request.form.get("grant_type", ""), shared.settings
    try:
        if grant == DEVICE_GRANT:
            approved = device_login.poll(shared.redis, _form("device_code"))
            _check_standing(approved["person"])
            login = device_login.new_login(shared.redis, approved, settings.signin_login_days)
        elif grant == "authorization_code" or (grant == "refresh_token" and request.form.get(
                "refresh_token", "").startswith(mcp_oauth.REFRESH_PREFIX)):
            return _agent_token(grant)
        elif grant == "refresh_token":
            login = device_login.use(shared.redis, _form("refresh_token"), settings.signin_login_days)
            _check_standing(login.person)
        else:
            raise device_login.Refused("unsupported_grant_type", f"grant_type: {grant[:80]!r} is not one this server "
                                       f"answers ({DEVICE_GRANT}, authorization_code, refresh_token)")
        _throttle("keys from a login", login.person)
    except device_login.Refused as refused:
        return _oauth_json({"error": refused.error, "error_description": refused.description}, 400)
    except ApiError as refused:  # (too many: RFC 6749 has no code of its own for it)
        return _oauth_json({"error": "slow_down", "error_description": refused.message}, refused.status)
    minted = own_keys.mint(shared.redis, login.person, login.groups, own_keys.Wanted(
        f"login: {login.label}"[:100], settings.signin_token_seconds, None, "login"))
    signin.audit(f"{login.person} (a command-line login)", request.remote_addr or "", "key minted", login.person,
                 {k: minted.record[k] for k in ("id", "label", "source", "expires")})
    answer = {"access_token": minted.key, "token_type": "Bearer", "expires_in": settings.signin_token_seconds,
              "expires_at": minted.record["expires"], "person": login.person}
    return _oauth_json(answer | ({"refresh_token": login.token} if login.token else {}))


def _agent_token(grant: str) -> Response:
    """An MCP agent's token (identity/mcp_oauth.py): a key only its resource takes, and the next refresh token."""
    signin, shared = _signin(), services()
    form, days = request.form.to_dict(), shared.settings.signin_login_days

    def may_hold(person: str) -> bool:
        return own_keys.standing(shared.redis, person) is not None
    try:
        holder = mcp_oauth.holder(shared.redis, form) if grant == "refresh_token" else None
        if holder is not None:  # (over the bound: refused before the refresh token is spent, so it still works)
            _throttle("keys from a login", holder, count=False)
        got = mcp_oauth.new_grant(shared.redis, mcp_oauth.take_code(shared.redis, form), days, may_hold) \
            if grant == "authorization_code" else mcp_oauth.refresh(shared.redis, form, days, may_hold)
        _throttle("keys from a login", got.person)
    except device_login.Refused as refused:
        return _oauth_json({"error": refused.error, "error_description": refused.description}, 400)
    except ApiError as refused:
        return _oauth_json({"error": "slow_down", "error_description": refused.message}, refused.status)
    seconds = shared.settings.signin_token_seconds
    minted = own_keys.mint(shared.redis, got.person, got.groups, own_keys.Wanted(
        f"MCP: {got.client_name}"[:100], seconds, None, "mcp", urlsplit(got.resource).path))
    signin.audit(f"{got.person} (an MCP agent)", request.remote_addr or "", "key minted", got.person,
                 {k: minted.record[k] for k in ("id", "label", "source", "expires")} | {"client_id": got.client_id})
    return _oauth_json({"access_token": minted.key, "token_type": "Bearer", "expires_in": seconds,
                        "refresh_token": got.refresh_token, "scope": "mcp"})


def _check_standing(person: str) -> None:
    """A login is made or used only for a person the server can still ask the provider about."""
    if own_keys.standing(services().redis, person) is None:
        raise device_login.Refused("invalid_grant", "the identity provider no longer answers for you here (or "
                                   "gave no refresh token at your sign-in): sign in again (python scripts/admin.py "
                                   "login)")


def _form(name: str) -> str:
    value = request.form.get(name, "")
    if not value or len(value) > 200:
        raise device_login.Refused("invalid_request", f"{name}: missing, or not one this server gave")
    return value


def _oauth_json(body: dict, status: int = 200) -> Response:
    response = jsonify(body)
    response.status_code = status
    response.headers["Cache-Control"] = "no-store"
    return response


def sign_in_first() -> Response:
    """A page asked for without a session: to the provider, and back here after."""
    return redirect(f"/login?next={quote(request.full_path.rstrip('?'), safe='/?=')}")  # (its own & quoted)


# --- wiring (create_app) ---------------------------------------------------------------------------------
def install_signin(app, shared) -> SessionCheck | None:
    """With an issuer configured: keys are on, minted keys are found in
    Redis, console pages take a session (the check returned), and the
    process's loop asking about people runs (from its first request)."""
    if not shared.settings.signin:
        return None
    shared.signin = SignIn(shared.settings, shared.redis, shared.sealer)
    app.before_request(_keep_rechecking(shared.signin))
    shared.keys.signin = True
    shared.keys.find_minted = lambda found: own_keys.key_of(shared.redis, shared.keys.policy, found)
    return _session_check


def _keep_rechecking(signin: SignIn) -> Callable[[], None]:
    """What starts this process's loop asking about people again (from its
    first request), and starts it anew if it died."""
    loop: gevent.Greenlet | None = None

    def ensure() -> None:
        nonlocal loop
        if loop is None or loop.dead:
            loop = gevent.spawn(_recheck_forever, signin)
    return ensure


def _recheck_forever(signin: SignIn) -> None:
    while True:
        gevent.sleep(RECHECK_LOOP_SECONDS)
        signin.recheck_turn()


def _session_check():
    """The session's key; a page asked for without one is sent to sign in (None: a 401 for the rest)."""
    signin = services().signin
    session = signin.session_of(request.cookies.get(SESSION_COOKIE))
    if session is None:
        return sign_in_first() if request.method == "GET" and "text/html" in request.headers.get("Accept", "") \
            else None
    if request.method not in ("GET", "HEAD") and request.headers.get("Origin", "") != _origin() and \
            not same_site_without_origin(request.headers.get("Origin", "")):
        raise ApiError(403, "a request from another site (or one that says none) may not use your sign-in")
    g.session = session
    return session.key()


def _origin() -> str:
    root = public_root()
    return root[:root.index("/", root.index("//") + 2)] if root.count("/") > 2 else root
