"""An API key carried in the URL path, for clients whose settings have only
a URL (Copilot's Ollama provider sends no key at all to /api/tags and
`Bearer ` with nothing after it to chat): a base URL of
`http://server:11434/k/<key>` works for every route, since every client
appends `/api/...` or `/v1/...` to it.

A WSGI middleware strips `/k/<key>` before routing and keeps the key aside
for auth. The key is never written anywhere in clear: what access logs
print of a request (gunicorn's `%(r)s` reads RAW_URI, `%(f)s` the Referer)
is redacted in place, in every form a client may send it: the path's
`/k/<key>` (wherever it stands, any case, a request line written as a
whole URL included) and a `key=` parameter.

The same goes for a key in the query string (`?key=`, the Gemini API's REST
form): kept aside, and redacted in the query and the request line. Only the
Gemini API's routes take a key there (app/auth.py).
"""
from __future__ import annotations

import re
from urllib.parse import unquote, unquote_plus

PATH_KEY = "switchboard.path_key"
QUERY_KEY = "switchboard.query_key"
_PREFIX = re.compile(r"^/k/([^/?]+)")
REDACTED = "/k/[redacted]"
_QUERY = re.compile(r"(?<![^?&])key=([^&#]*)")  # `key=` as a whole parameter, not `monkey=`
# What a log line may show of a URL: every `/k/<segment>` (any case) and `key=` parameter, wherever it is.
_ANY_PATH_KEY = re.compile(r"/k/[^/?#]+", re.IGNORECASE)
_ANY_QUERY_KEY = re.compile(r"(?<![^?&;])key=[^&#;]*", re.IGNORECASE)
LOGGED = ("RAW_URI", "REQUEST_URI", "HTTP_REFERER")


def redact_url(url: str) -> str:
    """A URL as a log line may show it: no key in its path or query."""
    return _ANY_QUERY_KEY.sub("key=[redacted]", _ANY_PATH_KEY.sub(REDACTED, url))


class PathKeyMiddleware:
    def __init__(self, wsgi_app):
        self.wsgi_app = wsgi_app

    def __call__(self, environ: dict, start_response):
        match = _PREFIX.match(environ.get("PATH_INFO", ""))
        if match:
            environ[PATH_KEY] = unquote(match.group(1))
            environ["PATH_INFO"] = environ["PATH_INFO"][match.end():] or "/"
        found = _QUERY.search(environ.get("QUERY_STRING", ""))
        if found:
            environ[QUERY_KEY] = unquote_plus(found.group(1))
            environ["QUERY_STRING"] = _QUERY.sub("key=[redacted]", environ["QUERY_STRING"])
        for name in LOGGED:
            if name in environ:
                environ[name] = redact_url(environ[name])
        return self.wsgi_app(environ, start_response)
