"""The web process's hook for API keys (identity/keys.py says who a key
is): every route needs a key, except views marked `@public` where they are
defined; with sign-in on, a console page may come with a session instead.

A key is presented in the URL path (`/k/<key>/...`, see app/pathkey.py: the
operator's explicit choice, so it wins over whatever a client's fixed header
holds), as `x-api-key` or `x-goog-api-key`, as `Authorization: Bearer <key>`,
or in the query string (`?key=`, the Gemini API's REST form, on its routes
only).
"""
from __future__ import annotations

import re
from typing import Callable

from flask import Flask, Response, current_app, g, request

from app.pathkey import PATH_KEY, QUERY_KEY
from identity.keys import ANONYMOUS, ApiKey, KeyRing, presented_key
from protocol.errors import SwitchboardError


def public(view: Callable) -> Callable:
    """Mark a view that anyone may call, keys or not (liveness, version)."""
    view.public = True
    return view


def current_key() -> ApiKey:
    return g.get("api_key", ANONYMOUS)


def _is_public(app: Flask) -> bool:
    if request.routing_exception is not None:  # no such route: a 404 (405) in JSON, key or not
        return True
    view = app.view_functions.get(request.endpoint) if request.endpoint else None
    return bool(getattr(view, "public", False))


# A key in the URL's query is the Gemini API's REST form, taken only where a Google client sends it: on
# the Gemini API's routes and the model list they share with OpenAI's. Elsewhere it would sit in every
# proxy's and browser's history.
QUERY_KEY_REFUSED = ("a key in the query (?key=) is taken only on the Gemini API's routes: send it as "
                     "Authorization: Bearer <key> or x-api-key")
_GEMINI_MODEL_LIST = re.compile(r"/v1(beta)?/models(/.*)?")


def _takes_query_key() -> bool:
    return request.blueprint == "gemini" or (request.method == "GET" and
                                             bool(_GEMINI_MODEL_LIST.fullmatch(request.path)))


# The pages a browser's sign-in session opens (the console, a person's own page): nothing else takes one.
SESSION_BLUEPRINTS = frozenset({"admin", "signin", "oauth", "mcp_accounts"})
SessionCheck = Callable[[], "ApiKey | Response | None"]


class Challenged(SwitchboardError):
    """A 401 that tells an OAuth client where to get a token (RFC 6750 §3, RFC 9728 §5.1)."""

    def __init__(self, message: str, challenge: str):
        super().__init__(message, 401)
        self.challenge = challenge

    @property
    def headers(self) -> dict[str, str]:
        return {"WWW-Authenticate": self.challenge}


def install_auth(app: Flask, keys: KeyRing, session: SessionCheck | None = None,
                 challenge: Callable[[], str | None] = lambda: None) -> None:
    """Before any work is done, a request to a non-public route must present
    a valid key (401 in its API's shape otherwise, with `challenge`'s
    WWW-Authenticate where it gives one). With sign-in on, a console page
    without a key may come with a session instead (`session` finds its key,
    or answers itself: a page is sent to sign in). A key bound to a resource
    (an MCP agent's token) is taken on that path only."""
    @app.before_request
    def require_key():
        if not _is_public(current_app):
            query_key = request.environ.get(QUERY_KEY)
            if query_key and keys.enabled and not _takes_query_key():
                raise SwitchboardError(QUERY_KEY_REFUSED, 401)
            presented = presented_key(request.headers.get("Authorization"), (
                request.headers.get("x-api-key"), request.headers.get("x-goog-api-key")),
                request.environ.get(PATH_KEY), query_key)
            if not presented and session is not None and request.blueprint in SESSION_BLUEPRINTS:
                found = session()
                if isinstance(found, ApiKey):
                    g.api_key = found
                    return None
                if found is not None:
                    return found
            try:
                g.api_key = keys.identify(presented, request.remote_addr)
            except SwitchboardError as refused:
                raise _challenged(refused, challenge()) from None
            bound = g.api_key.resource
            if bound and request.path != bound and not request.path.startswith(bound + "/"):
                raise SwitchboardError(f"this token is an MCP agent's: it is taken on {bound} only", 401)
        return None


def _challenged(refused: SwitchboardError, challenge: str | None) -> SwitchboardError:
    return Challenged(refused.message, challenge) if challenge and refused.status == 401 else refused
