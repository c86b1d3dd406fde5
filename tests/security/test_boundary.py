"""Property 10: with keys off (the default), only the office reaches the
server. A web page any person opens may not use it from their browser (a
`text/plain` POST needs no preflight, a WebSocket none either), on any
route of any dialect, nor may a DNS-rebinding page that reaches it under a
name of its own; a 403 names the setting that would allow it. Clients that
are not browsers, the server's own pages and local editors are unaffected."""
from __future__ import annotations

import json

import httpx
import pytest

CHAT = {"model": "echo", "messages": [{"role": "user", "content": "hello"}]}
ROUTES = {
    "openai chat": ("/v1/chat/completions", CHAT),
    "ollama chat": ("/api/chat", CHAT),
    "anthropic": ("/v1/messages", CHAT | {"max_tokens": 10}),
    "responses": ("/v1/responses", {"model": "echo", "input": "hello"}),
    "simple chat": ("/chat/completions", CHAT),
    "gemini": ("/v1beta/models/echo:generateContent", {"contents": [{"parts": [{"text": "hello"}]}]}),
    "mcp": ("/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}),
}


def post(base: str, path: str, body: dict, **headers: str) -> httpx.Response:
    return httpx.post(base + path, content=json.dumps(body), timeout=30,
                      headers={"Content-Type": "text/plain", "Accept": "*/*"} | headers)


@pytest.mark.parametrize("route", ROUTES, ids=ROUTES.keys())
@pytest.mark.parametrize("origin", ["http://evil.example", "https://intranet.evil.example:8443", "null",
                                    "http://127.0.0.1.evil.example"])
def test_a_web_page_elsewhere_may_not_call_any_api(stack, route, origin):
    path, body = ROUTES[route]
    answer = post(stack, path, body, Origin=origin)
    assert answer.status_code == 403 and "SWITCHBOARD_ALLOWED_ORIGINS" in answer.text, answer.text[:300]


@pytest.mark.parametrize("route", ROUTES, ids=ROUTES.keys())
@pytest.mark.parametrize("host", ["evil.example", "evil.example:11434", "rebind.attacker.test.", "x.example@127.0.0.1"])
def test_a_rebinding_page_under_its_own_name_is_refused(stack, route, host):
    path, body = ROUTES[route]
    answer = post(stack, path, body, Host=host)
    assert answer.status_code == 403 and "SWITCHBOARD_ALLOWED_HOSTS" in answer.text, answer.text[:300]


def test_the_websocket_upgrade_from_a_page_elsewhere_is_refused(stack):
    answer = httpx.get(stack + "/v1/responses", headers={
        "Origin": "http://evil.example", "Connection": "Upgrade", "Upgrade": "websocket",
        "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="})
    assert answer.status_code == 403


@pytest.mark.parametrize("headers", [{}, {"Origin": "vscode-webview://1a2b3c"}, {"Origin": "http://localhost:5173"},
                                     {"Host": "localhost"}, {"Host": "127.0.0.1"}, {"Host": "[::1]:11434"}],
                         ids=["no origin", "vscode webview", "a page on the person's machine", "localhost",
                              "an address", "ipv6 loopback"])
def test_clients_editors_and_the_machines_own_names_are_served(stack, headers):
    same_origin = {"Origin": stack} if not headers else {}
    answer = post(stack, "/v1/chat/completions", CHAT, **(headers | same_origin))
    assert answer.status_code == 200, answer.text[:300]


def test_the_operator_allows_a_name_and_an_origin(redis_url):
    from scripts.processes import stack_env, start_web

    web, base = start_web(stack_env(redis_url, SWITCHBOARD_ALLOWED_HOSTS="switchboard.office.example,*.corp.example",
                                    SWITCHBOARD_ALLOWED_ORIGINS="https://chat.office.example"))
    try:
        for host in ("switchboard.office.example", "gw.corp.example"):
            assert httpx.get(base + "/api/tags", headers={"Host": host}).status_code == 200
        assert httpx.get(base + "/api/tags", headers={"Host": "corp.example.evil"}).status_code == 403
        assert httpx.get(base + "/api/tags", headers={"Origin": "https://chat.office.example"}).status_code == 200
        assert httpx.get(base + "/api/tags", headers={"Origin": "https://chat.office.example.evil"}).status_code \
            == 403
    finally:
        web.stop()
