"""Attacks that held when the hostile tester tried them, kept in the
suite so that they go on holding: another key's MCP session, tool-name
tricks on /mcp, admin-only routes for a person's key or session, minting a
key from another site, and a person's own credentials never shown to a
client."""
from __future__ import annotations

import json

import httpx
import pytest

from tests.integration.mcp_stack import ALICE_KEY, CAROL_KEY, DAVE_KEY, ERIN_KEY, ERIN_TOKEN, TOOLS_TOKEN
from tests.integration.test_mcp_gateway import stateless
from tests.integration.test_server_tools import invoke
from tests.security.office import chat, signed_in
from tests.security.test_mcp import initialize


@pytest.fixture
def gateway(mcp_stack, clean_redis):
    return mcp_stack[0]


def test_another_keys_session_is_not_found(gateway):
    session = initialize(gateway, ALICE_KEY).headers["Mcp-Session-Id"]
    for method in ("tools/list", "tools/call"):
        answer = httpx.post(f"{gateway}/mcp", headers={"Authorization": f"Bearer {CAROL_KEY}",
                                                       "Mcp-Session-Id": session, "Accept": "application/json"},
                            json={"jsonrpc": "2.0", "id": 2, "method": method,
                                  "params": {"name": "git__git_log", "arguments": {}}})
        assert answer.status_code == 404
    assert httpx.delete(f"{gateway}/mcp", headers={"Authorization": f"Bearer {CAROL_KEY}",
                                                   "Mcp-Session-Id": session}).status_code == 404


@pytest.mark.parametrize("name", ["git__git_log", "GIT__git_log", "git__git_status/../git_log", "git__git_log%00",
                                  "time__../git__git_log", "git___git_log", "git__git_*", "git__", "__git_log",
                                  "git__git_status git_log"])
def test_tool_name_tricks_reach_no_tool_the_key_may_not_use(gateway, name):
    answer = stateless(gateway, CAROL_KEY, "tools/call", {"name": name, "arguments": {"repo_path": "/"}})
    body = answer.json()
    assert "error" in body or body.get("result", {}).get("isError"), body
    assert "notes.txt" not in json.dumps(body)


def test_a_persons_own_credential_never_reaches_a_client(gateway):
    through_gateway = stateless(gateway, ERIN_KEY, "tools/call", {"name": "tools__token", "arguments": {}}).text
    server_side = httpx.post(f"{gateway}/v1/chat/completions", headers={"Authorization": f"Bearer {ERIN_KEY}"},
                             json={"model": "echo:tools", "messages": [{"role": "user", "content": invoke("token")}]},
                             timeout=60).text
    for answer in (through_gateway, server_side):
        assert "own token accepted" in answer and ERIN_TOKEN not in answer and TOOLS_TOKEN not in answer


@pytest.mark.parametrize("path", ["/admin/status", "/admin/usage", "/admin/usage.csv", "/admin/audit",
                                  "/admin/people"])
def test_admin_routes_refuse_a_persons_key_and_session(office, path):
    bob = signed_in(office["front"], "bob")
    key = bob.request("POST", "/me/keys", json={"label": "k"}).json()["key"]
    assert chat(office["front"], key).status_code == 200
    assert httpx.get(office["front"] + path, headers={"Authorization": f"Bearer {key}"}).status_code == 403
    assert bob.request("GET", path).status_code == 403


@pytest.mark.parametrize("origin", ["http://evil.example", "null", ""])
def test_minting_from_another_site_is_refused(office, origin):
    bob = signed_in(office["front"], "bob")
    answer = bob.request("POST", "/me/keys", json={"label": "stolen"}, headers={"Origin": origin})
    assert answer.status_code == 403 and "key" not in answer.json()


def test_concurrent_calls_cannot_race_past_the_tool_rate(gateway):
    """Dave may make 2 tool calls a minute: 8 sent at once, 2 run (admission is one script in Redis)."""
    from concurrent.futures import ThreadPoolExecutor

    def call(n: int) -> dict:
        return stateless(gateway, DAVE_KEY, "tools/call", {"name": "tools__say", "arguments": {"text": f"{n}"}}).json()

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(call, range(8)))
    assert sum("result" in answer for answer in answers) == 2, [a.get("error", {}).get("message") for a in answers]


def everything_in(redis_client) -> bytes:
    """Every key of the database and everything it holds, as bytes (strings, hashes, lists, sets, streams)."""
    readers = {b"string": lambda k: [redis_client.get(k)], b"hash": lambda k: redis_client.hgetall(k).items(),
               b"list": lambda k: redis_client.lrange(k, 0, -1), b"set": redis_client.smembers,
               b"zset": lambda k: redis_client.zrange(k, 0, -1), b"stream": lambda k: redis_client.xrange(k)}
    found = []
    for key in redis_client.scan_iter(count=1000):
        found += [key, repr(list(readers.get(redis_client.type(key), lambda k: [])(key))).encode()]
    return b"\n".join(found)


def test_a_persons_own_credential_is_never_kept_in_redis(gateway, redis_client):
    stateless(gateway, ERIN_KEY, "tools/call", {"name": "tools__token", "arguments": {}})
    httpx.post(f"{gateway}/v1/chat/completions", headers={"Authorization": f"Bearer {ERIN_KEY}"}, timeout=60,
               json={"model": "echo:tools", "messages": [{"role": "user", "content": invoke("token")}]})
    kept = everything_in(redis_client)
    assert ERIN_TOKEN.encode() not in kept and TOOLS_TOKEN.encode() not in kept and ERIN_KEY.encode() not in kept
