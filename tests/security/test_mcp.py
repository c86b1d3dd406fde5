"""Properties 5 and 12, and /metrics: hostile MCP arguments cost
nothing (refused at the web, naming the limit, before the pool sees them);
every MCP method that reaches the servers or leaves state is metered
against the key's limits, and a key's sessions are bounded; a model's
server-side calls carry the caller's own credentials and count against the
caller's tool-call rate, as the caller's gateway calls do; a key limited
to some servers sees only their tools in /metrics. Against real MCP
servers behind the MCP stack (tests/integration/mcp_stack.py)."""
from __future__ import annotations

import json
import time

import httpx
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from app.mcp_gateway import MOST_SESSIONS
from protocol import keys
from tests.integration.mcp_stack import ALICE_KEY, CAROL_KEY, DAVE_KEY, ERIN_KEY
from tests.integration.test_mcp_gateway import stateless
from tests.integration.test_server_tools import invoke


@pytest.fixture
def gateway(mcp_stack, clean_redis):
    return mcp_stack[0]


def nested(levels: int) -> dict:
    value: dict = {"text": "x"}
    for _ in range(levels):
        value = {"a": value}
    return value


@pytest.mark.parametrize("levels", [70, 200, 900])
@pytest.mark.parametrize("method,params", [
    ("tools/call", lambda deep: {"name": "tools__say", "arguments": deep}),
    ("tools/call", lambda deep: {"name": "tools__say", "arguments": {"text": "x"}, "_meta": {"x": deep}}),
    ("prompts/get", lambda deep: {"name": "time__x", "arguments": deep}),
    ("resources/read", lambda deep: {"uri": "file:///x", "extra": [deep]}),
], ids=["arguments", "meta", "prompt arguments", "read params"])
def test_deep_arguments_are_refused_at_the_web_naming_the_limit(gateway, levels, method, params):
    started = time.monotonic()
    answer = stateless(gateway, ALICE_KEY, method, params(nested(levels)))
    error = answer.json()["error"]
    assert error["code"] == -32600 and "64 levels" in error["message"]
    assert time.monotonic() - started < 10  # (answered at once, never the pool's 30 s timeout)


def test_a_message_deeper_than_the_parser_goes_is_refused_the_same_way(gateway):
    arguments = '{"a":' * 20000 + '"x"' + "}" * 20000
    body = '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "tools__say", "arguments": ' + \
        arguments + "}}"
    answer = httpx.post(f"{gateway}/mcp", content=body, timeout=30, headers={
        "Authorization": f"Bearer {ALICE_KEY}", "Accept": "application/json", "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call", "Mcp-Name": "tools__say", "Content-Type": "application/json"})
    assert answer.json()["error"]["code"] == -32600 and "64 levels" in answer.json()["error"]["message"]


def test_the_shared_servers_keep_serving_after_deep_arguments(gateway):
    for levels in (200, 900):
        stateless(gateway, ALICE_KEY, "tools/call", {"name": "time__get_current_time", "arguments": nested(levels)})
    answer = stateless(gateway, ALICE_KEY, "tools/call", {"name": "time__get_current_time",
                                                          "arguments": {"timezone": "UTC"}})
    assert "result" in answer.json() and not answer.json()["result"].get("isError")


@pytest.mark.parametrize("method,params", [
    ("tools/list", {}), ("prompts/list", {}), ("resources/list", {}), ("resources/templates/list", {}),
    ("prompts/get", {"name": "time__nothing"}), ("resources/read", {"uri": "file:///nothing"}),
    ("completion/complete", {"ref": {"type": "ref/prompt", "name": "time__nothing"},
                             "argument": {"name": "a", "value": "b"}}),
])
def test_every_method_that_reaches_the_servers_is_metered(gateway, method, params):
    answers = [stateless(gateway, DAVE_KEY, method, params) for _ in range(3)]  # (dave: 2 tool calls a minute)
    error = answers[2].json()["error"]
    assert error["code"] == -32000 and "2 tool calls per minute" in error["message"], answers[2].text
    assert error["data"]["retryAfter"] >= 1


def initialize(base: str, key: str) -> httpx.Response:
    return httpx.post(f"{base}/mcp", headers={"Authorization": f"Bearer {key}", "Accept": "application/json"},
                      json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                          "protocolVersion": "2025-11-25", "capabilities": {},
                          "clientInfo": {"name": "hostile", "version": "1"}}}, timeout=30)


def test_initialize_is_metered(gateway):
    answers = [initialize(gateway, DAVE_KEY) for _ in range(3)]
    assert [("error" in a.json()) for a in answers] == [False, False, True]


def test_a_keys_sessions_are_bounded(gateway, redis_client):
    opened = [initialize(gateway, ALICE_KEY).headers["Mcp-Session-Id"] for _ in range(MOST_SESSIONS + 8)]
    held = [s for s in opened if redis_client.exists(keys.mcp_session_key(s))]
    assert held == opened[-MOST_SESSIONS:]
    oldest = httpx.post(f"{gateway}/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers={
        "Authorization": f"Bearer {ALICE_KEY}", "Mcp-Session-Id": opened[0], "Accept": "application/json"})
    assert oldest.status_code == 404
    assert initialize(gateway, CAROL_KEY).status_code == 200  # (another person's sessions are their own)


def test_metrics_show_a_key_only_the_tools_it_may_use(gateway):
    for key, name in ((ALICE_KEY, "tools__say"), (CAROL_KEY, "time__get_current_time")):
        stateless(gateway, key, "tools/call", {"name": name, "arguments": {"text": "x", "timezone": "UTC"}})
    carol = httpx.get(f"{gateway}/metrics", headers={"Authorization": f"Bearer {CAROL_KEY}"}).text
    series = [line for line in carol.splitlines() if line.startswith("switchboard_tool_calls_total{")]
    assert series and all('server="time"' in line or 'server="git",tool="git_status"' in line for line in series)
    alice = httpx.get(f"{gateway}/metrics", headers={"Authorization": f"Bearer {ALICE_KEY}"}).text
    assert 'server="tools"' in alice


JSON = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20), st.text(max_size=20)),
                    lambda inner: st.one_of(st.lists(inner, max_size=3),
                                            st.dictionaries(st.text(max_size=8), inner, max_size=3)), max_leaves=12)
METHODS = st.sampled_from(["initialize", "tools/list", "tools/call", "resources/read", "prompts/get",
                           "completion/complete", "server/discover", "ping", "notifications/cancelled", "x"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(method=METHODS, params=st.one_of(JSON, st.builds(lambda levels, leaf: nested(levels) | {"leaf": leaf},
                                                        st.integers(0, 120), JSON)),
       version=st.sampled_from([None, "2026-07-28", "2025-11-25", "1999-01-01"]),
       session=st.one_of(st.none(), st.text(max_size=120)), key=st.sampled_from([ALICE_KEY, DAVE_KEY, "wrong"]))
def test_the_gateway_answers_anything_without_a_5xx(gateway, method, params, version, session, key):
    # (A header value reaches a server without its surrounding whitespace, which HTTP clients refuse to send.)
    session = session.strip() if session else session
    headers = {"Authorization": f"Bearer {key}", "Accept": "application/json, text/event-stream",
               "Mcp-Method": method} | ({"MCP-Protocol-Version": version} if version else {}) | \
        ({"Mcp-Session-Id": session} if session and session.isascii() and session.isprintable() else {})
    answer = httpx.post(f"{gateway}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
                        headers=headers, timeout=30)
    assert answer.status_code < 500, answer.text[:300]


# --- 5. a model's server-side calls: the caller's credentials and the caller's limits ----------------------
def server_side(base: str, key: str, *calls: str) -> dict:
    """A chat on echo:tools whose message calls server tools: the reply (echo answers with their results)."""
    answer = httpx.post(f"{base}/v1/chat/completions", headers={"Authorization": f"Bearer {key}"}, timeout=60,
                        json={"model": "echo:tools", "messages": [{"role": "user", "content": "\n".join(calls)}]})
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_a_server_side_call_carries_the_callers_own_credentials(gateway):
    own = server_side(gateway, ERIN_KEY, invoke("token"))  # (erin has her own X-Tools-Token for "tools")
    assert own["choices"][0]["message"]["content"] == "own token accepted"
    shared = server_side(gateway, ALICE_KEY, invoke("token"))
    assert shared["choices"][0]["message"]["content"] == "token accepted"
    through_gateway = stateless(gateway, ERIN_KEY, "tools/call", {"name": "tools__token", "arguments": {}})
    assert "own token accepted" in json.dumps(through_gateway.json())


@pytest.mark.parametrize("how", ["one round", "one chat each"])
def test_server_side_calls_count_against_the_callers_tool_rate(gateway, how):
    calls = [invoke("say", text=f"call {n}") for n in range(3)]  # (dave: 2 tool calls a minute)
    replies = [server_side(gateway, DAVE_KEY, *calls)] if how == "one round" else \
        [server_side(gateway, DAVE_KEY, call) for call in calls]
    activity = [a for reply in replies for a in reply["server_tools"]]
    text = "\n".join(reply["choices"][0]["message"]["content"] for reply in replies)
    assert [a["status"] for a in activity] == ["ok", "ok", "error"]
    assert "call 0" in text and "call 1" in text and "2 tool calls per minute" in text and "call 2" not in text
    after = stateless(gateway, DAVE_KEY, "tools/call", {"name": "tools__say", "arguments": {"text": "x"}})
    assert "2 tool calls per minute" in after.json()["error"]["message"]  # (one rate, whoever made the calls)
