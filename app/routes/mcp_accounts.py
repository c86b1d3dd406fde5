"""A person's own accounts on the OAuth-protected MCP servers
(identity/mcp_accounts.py), from their page, with sign-in on:

- `GET /me/mcp/<server>/connect`: off to the server's authorization server
  (discovered, and registered with once) to sign in there and consent; the
  link an agent's error or a model's tool result gives a person who has
  not connected the server yet.
- `GET /me/mcp/callback`: its answer; the tokens kept, sealed, for this
  person only; back to /me.
- `POST /me/mcp/<server>/disconnect`: the tokens revoked there (where the
  server offers it) and forgotten here.

Connecting and disconnecting are in the audit log; the console lists who
connected which server.
"""
from __future__ import annotations

from flask import Blueprint, jsonify, redirect, request

from app import pages, person_page
from app.errors import ApiError, register_error_handlers
from app.routes.signin import _session, _signin, _throttle, public_root
from app.services import services
from dialects.openai_writer import error_body
from identity import mcp_accounts
from identity.keys import signed_in_name

bp = Blueprint("mcp_accounts", __name__)
register_error_handlers(bp, error_body)


def _server(name: str):
    """The OAuth server `name`, if the person may use it (one answer for "no such server" and "not yours")."""
    session, shared = _session(), services()
    if not person_page.acts_as_them(shared, shared.keys.policy.template(session.groups), name[:100]):
        return None
    return shared.registry.servers[name[:100]]


@bp.get("/me/mcp/<name>/connect")
def connect(name: str):
    _signin()
    session, shared = _session(), services()
    server = _server(name)
    if server is None:
        return pages.message("No such server", f"There is no MCP server {name[:100]!r} here that acts as you.", 404,
                             (("Your page", "/me"),))
    _throttle("account connections", session.person)
    try:
        url = mcp_accounts.begin(shared.redis, shared.sealer, server, signed_in_name(session.person), public_root())
    except mcp_accounts.ConnectFailed as failed:
        return pages.message("The server cannot be connected now", f'"{server.name}": {failed}', 502,
                             (("Your page", "/me"),))
    return redirect(url, 303)


@bp.get("/me/mcp/callback")
def connected():
    signin, session, shared = _signin(), _session(), services()
    if request.args.get("error"):
        said = f'{request.args.get("error")[:100]}: {request.args.get("error_description", "")[:300]}'
        mcp_accounts.abandon(shared.redis, request.args.get("state", ""))
        return pages.message("Not connected", f"The server's sign-in refused the connection ({said}).", 403,
                             (("Your page", "/me"),))
    try:
        name = mcp_accounts.complete(shared.redis, shared.sealer, shared.registry.servers,
                                     signed_in_name(session.person),
                                     request.args.get("state", ""), request.args.get("code", ""),
                                     request.args.get("iss"))
    except mcp_accounts.ConnectFailed as failed:
        return pages.message("Not connected", str(failed), 400, (("Your page", "/me"),))
    signin.audit(f"{session.person} (signed in)", request.remote_addr or "", "mcp account connected",
                 session.person, {"server": name})
    return redirect("/me#mcp", 303)


@bp.post("/me/mcp/<name>/disconnect")
def disconnect(name: str):
    signin, session, shared = _signin(), _session(), services()
    server = shared.registry.servers.get(name[:100])
    if server is None or server.auth != "oauth":
        raise ApiError(404, f"no MCP server {name[:100]!r} here acts as you")
    holder = signed_in_name(session.person)
    mcp_accounts.revoke_at_server(shared.redis, shared.sealer, server.name, holder)
    if not mcp_accounts.drop(shared.redis, server.name, holder):
        raise ApiError(404, f'you have not connected "{server.name}"')
    signin.audit(f"{session.person} (signed in)", request.remote_addr or "", "mcp account disconnected",
                 session.person, {"server": server.name})
    return jsonify({"server": server.name, "connected": False})
