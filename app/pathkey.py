"""An API key carried in the URL path, for clients whose settings have only
a URL (Copilot's Ollama provider sends no key at all to /api/tags and
`Bearer ` with nothing after it to chat): a base URL of
`http://server:11434/k/<key>` works for every route, since every client
appends `/api/...` or `/v1/...` to it.

A WSGI middleware strips `/k/<key>` before routing and keeps the key aside
for auth. The key is never written anywhere in clear: the request line that
access logs print (gunicorn's `%(r)s` reads RAW_URI) is redacted in place.

The same goes for a key in the query string (`?key=`, the Gemini API's REST
form): kept aside, and redacted in the query and the request line.
"""
from __future__ import annotations

import re
from urllib.parse import unquote, unquote_plus

PATH_KEY = "switchboard.path_key"
QUERY_KEY = "switchboard.query_key"
_PREFIX = re.compile(r"^/k/([^/?]+)")
REDACTED = "/k/[redacted]"
_QUERY = re.compile(r"(?<![^?&])key=([^&#]*)")  # `key=` as a whole parameter, not `monkey=`


class PathKeyMiddleware:
    def __init__(self, wsgi_app):
        self.wsgi_app = wsgi_app

    def __call__(self, environ: dict, start_response):
        match = _PREFIX.match(environ.get("PATH_INFO", ""))
        if match:
            environ[PATH_KEY] = unquote(match.group(1))
            environ["PATH_INFO"] = environ["PATH_INFO"][match.end():] or "/"
            for name in ("RAW_URI", "REQUEST_URI"):
                if name in environ:
                    environ[name] = _PREFIX.sub(REDACTED, environ[name], count=1)
        found = _QUERY.search(environ.get("QUERY_STRING", ""))
        if found:
            environ[QUERY_KEY] = unquote_plus(found.group(1))
            for name in ("QUERY_STRING", "RAW_URI", "REQUEST_URI"):
                if name in environ:
                    environ[name] = _QUERY.sub("key=[redacted]", environ[name])
        return self.wsgi_app(environ, start_response)
