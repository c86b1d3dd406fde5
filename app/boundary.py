"""Who may reach the server at all, before any key is looked at: the one
place that decides a request's client address, its Host and its Origin,
and the headers every page carries.

- The client's address: a request from a trusted reverse proxy
  (SWITCHBOARD_TRUSTED_PROXIES) is the address its `X-Forwarded-For` names
  (the rightmost hop that is not itself a trusted proxy); from anywhere
  else the header is ignored, so nobody picks their own address (and with
  it someone else's throttle).
- Host: only the names the operator serves (loopback, the machine's own
  names, any IP address, SWITCHBOARD_PUBLIC_URL's host, and
  SWITCHBOARD_ALLOWED_HOSTS). A DNS-rebinding page reaches the server under
  its own name, and is refused (Ollama's fix of CVE-2024-28224, the same
  class of hole).
- Origin: a browser's request from another web page is refused on every
  route unless its origin is the server's own, a local editor's
  (vscode-webview://, app://...), a page on the person's own machine
  (localhost), or one in SWITCHBOARD_ALLOWED_ORIGINS. With keys off this
  is what keeps a page any person opens from using the office's models
  and tools (a `text/plain` POST needs no preflight).
- Pages: `Referrer-Policy: no-referrer` on every answer (a console URL may
  hold a key: `/k/<key>/admin`), and the console, `/me` and the device page
  may not be framed (`frame-ancestors 'none'`, `X-Frame-Options: DENY`).
"""
from __future__ import annotations

import fnmatch
import ipaddress
import socket
from urllib.parse import urlsplit

from flask import Flask, request

from app.errors import ApiError
from identity.keys import networks

# Origins of local programs a person runs: editors' webviews and desktop apps (as Ollama's defaults).
LOCAL_ORIGINS = ("vscode-webview://*", "vscode-file://*", "app://*", "file://*", "tauri://*",
                 "http://localhost", "https://localhost", "http://localhost:*", "https://localhost:*",
                 "http://127.0.0.1", "https://127.0.0.1", "http://127.0.0.1:*", "https://127.0.0.1:*",
                 "http://[::1]", "http://[::1]:*")
PAGE_BLUEPRINTS = frozenset({"admin", "signin"})


def _ip(text: str):
    try:
        return ipaddress.ip_address(text.strip().strip("[]"))
    except ValueError:
        return None


class ForwardedFor:
    """WSGI middleware: REMOTE_ADDR is the client a trusted proxy forwards for."""

    def __init__(self, wsgi_app, proxies: tuple):
        self.wsgi_app, self.proxies = wsgi_app, proxies

    def _trusted(self, address) -> bool:
        return address is not None and any(address in network for network in self.proxies)

    def __call__(self, environ: dict, start_response):
        forwarded = environ.get("HTTP_X_FORWARDED_FOR")
        if forwarded and self._trusted(_ip(environ.get("REMOTE_ADDR", ""))):
            client = self.client_of(forwarded)
            if client is not None:
                environ["REMOTE_ADDR"] = client
        return self.wsgi_app(environ, start_response)

    def client_of(self, forwarded: str) -> str | None:
        """The rightmost hop no trusted proxy vouches for (the hops left of it are the client's to write)."""
        for hop in reversed(forwarded.split(",")):
            address = _ip(hop)
            if address is None:
                return None  # (a hop that is no address: trust nothing it says)
            if not self._trusted(address):
                return str(address)
        return None


class Boundary:
    def __init__(self, allowed_hosts: str | None, allowed_origins: str | None, public_url: str | None):
        names = {"localhost", socket.gethostname().lower(), socket.getfqdn().lower()}
        if public_url:
            names.add((urlsplit(public_url).hostname or "").lower())
        self.hosts = tuple(sorted(names | _listed(allowed_hosts)))
        self.origins = LOCAL_ORIGINS + tuple(sorted(_listed(allowed_origins)))
        self.public_origin = _origin_of(public_url) if public_url else None

    def host_allowed(self, host: str) -> bool:
        name = _host_name(host)
        if name is None:
            return False
        return _ip(name) is not None or name.endswith(".localhost") or \
            any(fnmatch.fnmatchcase(name, pattern) for pattern in self.hosts)

    def origin_allowed(self, origin: str, host: str) -> bool:
        origin = origin.strip().lower().rstrip("/")
        if origin in (f"http://{host.lower()}", f"https://{host.lower()}", self.public_origin) or \
                same_site_without_origin(origin):
            return True
        return origin != "null" and any(fnmatch.fnmatchcase(origin, pattern) for pattern in self.origins)

    def check(self) -> None:
        host = request.headers.get("Host", "")
        if host and not self.host_allowed(host):  # (no Host at all: an HTTP/1.0 probe; a browser sends one)
            raise ApiError(403, f"this server does not answer to the name {host[:100]!r} (a page under another "
                                "name may not reach it): the operator adds it to SWITCHBOARD_ALLOWED_HOSTS")
        origin = request.headers.get("Origin")
        if origin is not None and not self.origin_allowed(origin, host):
            raise ApiError(403, f"a web page of {origin[:100]!r} may not call this server from a browser: the "
                                "operator adds its origin to SWITCHBOARD_ALLOWED_ORIGINS")


def public_root(settings) -> str:
    """This server's URL as people reach it (SWITCHBOARD_PUBLIC_URL, else the request's), without its last /."""
    return (settings.public_url or request.url_root).rstrip("/")


def same_site_without_origin(origin: str) -> bool:
    """A browser's POST from one of our own pages: under `Referrer-Policy: no-referrer` it says `Origin: null`
    (the Fetch standard), and its `Sec-Fetch-Site`, which no page can set, says where it came from."""
    return origin == "null" and request.headers.get("Sec-Fetch-Site") == "same-origin"


def _listed(text: str | None) -> set[str]:
    return {part.strip().lower().rstrip("/") for part in (text or "").split(",") if part.strip()}


def _host_name(host: str) -> str | None:
    """The name of a Host header (no port, no trailing dot); None for one no client would send."""
    host = host.strip().lower()
    if not host or any(ch in host for ch in "/\\@ \t?#"):
        return None
    if host.startswith("["):
        end = host.find("]")
        return host[1:end] if end > 0 else None
    name, _, port = host.partition(":")
    if port and not port.isdigit():
        return None
    return name.rstrip(".") or None


def _origin_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


def _headers(response):
    response.headers.setdefault("Referrer-Policy", "no-referrer")
    if request.blueprint in PAGE_BLUEPRINTS or response.mimetype == "text/html":
        response.headers["X-Frame-Options"] = "DENY"
        policy = response.headers.get("Content-Security-Policy")
        response.headers["Content-Security-Policy"] = "; ".join(filter(None, (policy, "frame-ancestors 'none'")))
    return response


def install_boundary(app: Flask, settings) -> None:
    """Registered first: a request from a name or page the server does not serve is refused before all else."""
    boundary = Boundary(settings.allowed_hosts, settings.allowed_origins, settings.public_url)
    app.before_request(boundary.check)
    app.after_request(_headers)
    app.wsgi_app = ForwardedFor(app.wsgi_app, networks(settings.trusted_proxies, "SWITCHBOARD_TRUSTED_PROXIES"))
