"""The MCP gateway's authorization server on the web (identity/mcp_oauth.py),
with sign-in on:

- `GET /.well-known/oauth-protected-resource/mcp` (and `/mcp/<server>`):
  the resource's metadata (RFC 9728), naming this server as its
  authorization server; `/mcp` without a credential answers 401 with
  `WWW-Authenticate: Bearer resource_metadata="..."` pointing there.
- `GET /.well-known/oauth-authorization-server`: this server's metadata
  (RFC 8414): authorization code with PKCE (S256), refresh tokens,
  resource indicators, public clients registered (RFC 7591) or known by
  their client metadata document's URL.
- `POST /oauth/register` (RFC 7591); `GET /oauth/authorize`: signed in (the
  office's provider, as the console), the consent page naming the agent;
  `POST /oauth/authorize`: the person's answer, back to the agent's
  redirect URI with a code; the code and the refresh token are traded at
  `POST /auth/token` (app/routes/signin.py, beside the command-line logins'
  grants) for a key that only the resource takes.
"""
from __future__ import annotations

from urllib.parse import urlencode, urlsplit

from flask import Blueprint, Response, jsonify, redirect, request

from app import pages
from app.auth import public
from app.errors import ApiError, register_error_handlers
from app.routes.signin import NO_REFRESH_TOKEN, _oauth_json, _session, _signin, _throttle, public_root
from app.services import services
from dialects.openai_writer import error_body
from identity import mcp_oauth

bp = Blueprint("oauth", __name__)
register_error_handlers(bp, error_body)
RESOURCE_PATHS = ("/mcp",)  # the protected resource (and each server's endpoint below it)
SCOPE = "mcp"


def resources() -> tuple[str, ...]:
    """The resource identifiers this server issues tokens for: the gateway's URL, and each server's below it."""
    root = public_root()
    return (f"{root}/mcp", *(f"{root}/mcp/{name}" for name in services().registry.servers))


def challenge() -> str | None:
    """The WWW-Authenticate of a 401 on a protected path (None elsewhere, or with sign-in off)."""
    if services().signin is None or not _protected(request.path):
        return None
    error = ' error="invalid_token"' if request.headers.get("Authorization") else ""
    return (f'Bearer resource_metadata="{public_root()}/.well-known/oauth-protected-resource{request.path}", '
            f'scope="{SCOPE}"{error}')


def _protected(path: str) -> bool:
    return any(path == prefix or path.startswith(prefix + "/") for prefix in RESOURCE_PATHS)


@bp.get("/.well-known/oauth-protected-resource/mcp")
@bp.get("/.well-known/oauth-protected-resource/mcp/<server>")
@public
def resource_metadata(server: str | None = None):
    _signin()
    resource = f"{public_root()}/mcp" + (f"/{server}" if server else "")
    if resource not in resources():
        raise ApiError(404, f"no MCP server named {server!r} here")
    return _metadata({"resource": resource, "authorization_servers": [public_root()],
                      "bearer_methods_supported": ["header"], "scopes_supported": [SCOPE],
                      "resource_name": "Switchboard's MCP gateway"})


@bp.get("/.well-known/oauth-authorization-server")
@public
def server_metadata():
    _signin()
    root = public_root()
    return _metadata({
        "issuer": root, "authorization_endpoint": f"{root}/oauth/authorize", "token_endpoint": f"{root}/auth/token",
        "registration_endpoint": f"{root}/oauth/register", "device_authorization_endpoint": f"{root}/auth/device",
        "scopes_supported": [SCOPE], "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token",
                                  "urn:ietf:params:oauth:grant-type:device_code"],
        "code_challenge_methods_supported": ["S256"], "token_endpoint_auth_methods_supported": ["none"],
        "client_id_metadata_document_supported": services().settings.agent_metadata_documents,
        "authorization_response_iss_parameter_supported": True})


def _metadata(body: dict) -> Response:
    response = jsonify(body)
    response.headers["Cache-Control"] = "max-age=300"
    response.headers["Access-Control-Allow-Origin"] = "*"  # (public documents; browser-based agents read them)
    return response


@bp.post("/oauth/register")
@public
def register():
    _signin()
    _throttle("agent registrations", request.remote_addr or "")
    try:
        record = mcp_oauth.register(services().redis, request.get_json(silent=True))
    except mcp_oauth.BadClient as bad:
        return _oauth_json({"error": bad.error, "error_description": bad.description}, 400)
    return _oauth_json(record, 201)


@bp.get("/oauth/authorize")
def authorize():
    """Signed in (else the auth hook sent the browser to sign in first): the consent page."""
    _signin()
    session, shared = _session(), services()
    try:
        ask = mcp_oauth.check_ask(shared.redis, request.args.to_dict(), resources(), _documents())
    except mcp_oauth.Unredirectable as refused:
        return pages.message("The agent's request is refused", refused.description, 400)
    except mcp_oauth.SentBack as refused:
        return _back(refused.redirect_uri, request.args.get("state", "")[:500],
                     {"error": refused.error, "error_description": refused.description})
    ask_id = mcp_oauth.hold_ask(shared.redis, ask, session.person)
    return pages.consent(session.person, ask, ask_id, urlsplit(ask.redirect_uri).netloc)


@bp.post("/oauth/authorize")
def decide():
    signin, session, shared = _signin(), _session(), services()
    ask = mcp_oauth.take_ask(shared.redis, request.form.get("ask", ""), session.person)
    if ask is None:
        return pages.message("Nothing waits", "This request was answered already or waited too long: add the "
                             "server to the agent again.", 404)
    if request.form.get("decision") != "approve":
        return _back(ask.redirect_uri, ask.state, {"error": "access_denied", "error_description": "refused"})
    if not signin.can_mint(session.person):
        return pages.message("Not approved", NO_REFRESH_TOKEN, 403)
    code = mcp_oauth.issue_code(shared.redis, ask, session.person, session.groups)
    signin.audit(f"{session.person} (signed in)", request.remote_addr or "", "agent approved", session.person,
                 {"client": ask.client_name, "client_id": ask.client_id, "resource": ask.resource})
    return _back(ask.redirect_uri, ask.state, {"code": code})


def _documents() -> mcp_oauth.Documents | None:
    settings = services().settings
    if not settings.agent_metadata_documents:
        return None
    return mcp_oauth.Documents(tuple(host.strip() for host in settings.agent_metadata_hosts.split(",") if host.strip()))


def _back(redirect_uri: str, state: str, answer: dict) -> Response:
    """To the agent's redirect URI (checked: check_ask), with the answer, its state and our issuer (RFC 9207)."""
    query = answer | ({"state": state} if state else {}) | {"iss": public_root()}
    return redirect(redirect_uri + ("&" if "?" in redirect_uri else "?") + urlencode(query), 302)
