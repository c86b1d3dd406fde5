"""Property 8 and its neighbours: a key never reaches a log, in any form a
client or a browser sends it (the path's `/k/<key>` anywhere and in any
case, a request line written as a whole URL, `?key=`, a Referer holding
either); pages tell browsers to send no Referer and not to be framed; a key
in the query is taken only where Google's clients send it; and a client's
X-Request-Id never becomes the id another request's records are kept by."""
from __future__ import annotations

import socket
from urllib.parse import urlsplit

import httpx
import pytest

from tests.integration.waits import wait_until
from tests.security.office import OPS_KEY, as_key, chat, signed_in


def raw_request(base: str, line: str, headers: dict) -> bytes:
    """One request written by hand (a request line as a client may write it), its answer's head."""
    parts = urlsplit(base)
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as sock:
        head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        sock.sendall(f"{line}\r\nHost: {parts.netloc}\r\n{head}Connection: close\r\n\r\n".encode())
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer.split(b"\r\n\r\n", 1)[0]


def test_no_form_of_a_key_reaches_the_access_log(office):
    front, log = office["front"], office["access_log"]
    netloc = urlsplit(front).netloc
    sent = [
        ("GET /k/{k}/admin/status HTTP/1.1", {}),
        ("GET http://{n}/k/{k}/api/tags HTTP/1.1", {}),
        ("GET //k/{k}/api/tags HTTP/1.1", {}),
        ("GET /K/{k}/api/tags HTTP/1.1", {}),
        ("GET /v1beta/models?key={k} HTTP/1.1", {}),
        ("GET /v1beta/models?alt=json&key={k}&x=1 HTTP/1.1", {}),
        ("GET /admin/status HTTP/1.1", {"Referer": "http://{n}/k/{k}/admin", "x-api-key": "{k}"}),
        ("GET /admin/status HTTP/1.1", {"Referer": "http://{n}/admin?key={k}", "x-api-key": "{k}"}),
        ("GET /admin/status HTTP/1.1", {"Referer": "http://{n}//k/{k}/admin#x", "x-api-key": "{k}"}),
    ]
    for line, headers in sent:
        filled = {name: value.format(k=OPS_KEY, n=netloc) for name, value in headers.items()}
        assert raw_request(front, line.format(k=OPS_KEY, n=netloc), filled).startswith(b"HTTP/1.1 ")
    wait_until(lambda: log.read_text().count("\n") >= len(sent), what="the access log's lines")
    written = log.read_text()
    assert OPS_KEY not in written and OPS_KEY[:12] not in written, written[-2000:]
    assert "/k/[redacted]" in written and "key=[redacted]" in written


@pytest.mark.parametrize("path", ["/me", "/login/device", "/admin", "/k/{k}/admin", "/admin/requests"])
def test_pages_send_no_referrer_and_may_not_be_framed(office, path):
    bob = signed_in(office["front"], "bob")
    answer = bob.request("GET", path.format(k=OPS_KEY), headers={"Accept": "text/html"})
    assert answer.status_code in (200, 403), answer.text[:200]
    assert answer.headers["Referrer-Policy"] == "no-referrer"
    assert answer.headers["X-Frame-Options"] == "DENY"
    assert "frame-ancestors 'none'" in answer.headers["Content-Security-Policy"]


@pytest.mark.parametrize("method,path", [("POST", "/v1/chat/completions"), ("POST", "/api/chat"),
                                         ("POST", "/v1/messages"), ("GET", "/api/tags"), ("GET", "/admin/status"),
                                         ("POST", "/mcp")])
def test_a_key_in_the_query_is_refused_outside_the_gemini_routes(office, method, path):
    answer = httpx.request(method, f"{office['front']}{path}", params={"key": OPS_KEY},
                           json={"model": "echo", "messages": [{"role": "user", "content": "hi"}]})
    assert answer.status_code == 401 and "x-api-key" in answer.text and "?key=" in answer.text


@pytest.mark.parametrize("path", ["/v1beta/models", "/v1/models", "/v1beta/models/echo"])
def test_the_gemini_routes_take_a_key_in_the_query(office, path):
    assert httpx.get(f"{office['front']}{path}", params={"key": OPS_KEY}).status_code == 200


def test_a_client_cannot_pick_another_requests_id(office):
    front = office["front"]
    first = chat(front, OPS_KEY, **{"X-Request-Id": "chosen-id"})
    second = httpx.post(f"{front}/v1/chat/completions", headers=as_key(OPS_KEY) | {"X-Request-Id": "chosen-id"},
                        json={"model": "echo", "messages": [{"role": "user", "content": "something else"}]})
    assert first.headers["X-Request-Id"] == second.headers["X-Request-Id"] == "chosen-id"  # (echoed, as sent)
    def two_records() -> list[dict]:
        found = [r for r in httpx.get(f"{front}/admin/requests.json", headers=as_key(OPS_KEY)).json()["requests"]
                 if r["person"] == "ops"]
        return found if len(found) == 2 else []

    records = wait_until(two_records, what="both requests' records")
    ids = {r["request"] for r in records}
    assert len(ids) == 2 and "chosen-id" not in ids
    bodies = [httpx.get(f"{front}/admin/requests/{i}/body", headers=as_key(OPS_KEY)).json() for i in ids]
    assert sorted(b["request"]["messages"][0]["content"] for b in bodies) == ["hello there", "something else"]
