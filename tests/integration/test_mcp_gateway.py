"""The MCP gateway for agents (/mcp, /mcp/<server>), driven by the official
`mcp` SDK's client in both spec eras and by raw HTTP, against real MCP
servers (`mcp-server-time` and `mcp-server-git` over stdio, the tests' own
tool server over streamable HTTP) run by a real MCP pool process."""
from __future__ import annotations

import asyncio
import json
import threading

import httpx
import httpx2
import psutil
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from ledger.request_log import FIELDS
from protocol.keys import REQUEST_LOG, active_key, fair_waiting_key
from scripts.processes import stack_env, start_web
from tests.integration.mcp_stack import (
    ALICE_KEY, BOB_KEY, CAROL_KEY, DAVE_KEY, ERIN_KEY, ERIN_TOKEN, FRANK_KEY, TOOLS_TOKEN, keys_text,
)
from tests.integration.browser import text_of as text_of_page
from tests.integration.http import DroppableStream
from tests.integration.otlp_receiver import OtlpReceiver
from tests.integration.test_fuzz import mutants
from tests.integration.waits import wait_until

ERAS = {"session": "legacy", "stateless": "auto"}  # the SDK's modes: the handshake, or discover first
STATELESS_HEADERS = {"MCP-Protocol-Version": "2026-07-28", "Accept": "application/json, text/event-stream"}
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


@pytest.fixture
def gateway(mcp_stack, clean_redis):
    return mcp_stack[0]


def with_client(url: str, key: str, era: str, use):
    """`use(client)`'s result, on an SDK client of `era` connected with the key."""
    async def run():
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60)
        async with Client(streamable_http_client(url, http_client=http), mode=ERAS[era]) as client:
            return client.protocol_version, await use(client)
    return asyncio.run(run())


def text_of(result) -> str:
    return "\n".join(part.text for part in result.content)


def stateless(base: str, key: str, method: str, params: dict | None = None, path: str = "/mcp",
              **extra_headers) -> httpx.Response:
    """One stateless-era request, as its headers must mirror it."""
    params = {"_meta": META} | (params or {})
    headers = STATELESS_HEADERS | {"Mcp-Method": method, "Authorization": f"Bearer {key}"} | extra_headers
    named = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}.get(method)
    if named in params:
        headers["Mcp-Name"] = params[named]
    return httpx.post(f"{base}{path}", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
                      headers=headers, timeout=60)


@pytest.fixture
def repository(mcp_stack) -> str:
    return str(mcp_stack[1] / "repo")


@pytest.mark.parametrize("era", ERAS)
def test_the_sdk_lists_and_calls_real_servers_through_the_gateway(gateway, era, repository):
    async def use(client):
        names = [tool.name for tool in (await client.list_tools()).tools]
        now = await client.call_tool("time__get_current_time", {"timezone": "UTC"})
        status = await client.call_tool("git__git_status", {"repo_path": repository})
        return names, text_of(now), text_of(status)
    version, (names, now, status) = with_client(f"{gateway}/mcp", ALICE_KEY, era, use)
    assert version == ("2025-11-25" if era == "session" else "2026-07-28")
    assert {"time__get_current_time", "time__convert_time", "git__git_status", "git__git_log", "tools__say"} <= set(names)
    assert json.loads(now)["timezone"] == "UTC"
    assert "Untracked files" in status and "notes.txt" in status  # git's own answer


@pytest.mark.parametrize("era", ERAS)
def test_one_servers_endpoint_keeps_its_own_names(gateway, era):
    async def use(client):
        names = [tool.name for tool in (await client.list_tools()).tools]
        return names, text_of(await client.call_tool("say", {"text": "hello"}))
    _, (names, said) = with_client(f"{gateway}/mcp/tools", ALICE_KEY, era, use)
    assert {"say", "slow", "token"} <= set(names) and not any("__" in name for name in names)
    assert said == "hello"


@pytest.mark.parametrize("era", ERAS)
def test_a_key_gets_exactly_its_tools(gateway, era, repository):
    async def use(client):
        names = sorted(tool.name for tool in (await client.list_tools()).tools)
        allowed = text_of(await client.call_tool("git__git_status", {"repo_path": repository}))
        with pytest.raises(MCPError) as refused:
            await client.call_tool("git__git_log", {"repo_path": repository})
        return names, allowed, refused.value
    _, (names, allowed, refused) = with_client(f"{gateway}/mcp", CAROL_KEY, era, use)
    assert names == ["git__git_status", "time__convert_time", "time__get_current_time"]
    assert "notes.txt" in allowed
    assert refused.code == -32602 and '"git__git_log"' in refused.message


def test_a_server_the_key_may_not_use_is_not_there(gateway):
    for path in ("/mcp/git", "/mcp/no-such-server"):
        response = stateless(gateway, BOB_KEY, "tools/list", path=path)
        assert response.status_code == 404 and "no MCP server" in response.json()["error"]
    listed = stateless(gateway, BOB_KEY, "tools/list").json()["result"]["tools"]
    assert {tool["name"].split("__")[0] for tool in listed} == {"time"}


def test_keys_travel_as_agents_send_them(gateway):
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}}
    headers = STATELESS_HEADERS | {"Mcp-Method": "tools/list"}
    assert httpx.post(f"{gateway}/mcp", json=body, headers=headers).status_code == 401
    for how in ({"x-api-key": BOB_KEY}, {"Authorization": f"Bearer {BOB_KEY}"}):
        assert httpx.post(f"{gateway}/mcp", json=body, headers=headers | how).status_code == 200
    in_path = httpx.post(f"{gateway}/k/{BOB_KEY}/mcp/time", json=body, headers=headers)
    assert [tool["name"] for tool in in_path.json()["result"]["tools"]] == ["get_current_time", "convert_time"]


def test_a_revoked_keys_open_session_is_refused_on_its_next_call(gateway, mcp_stack):
    keys_file = mcp_stack[1] / "keys.toml"

    async def use(client):
        assert (await client.list_tools()).tools
        keys_file.write_text(keys_text(bob=False))
        try:
            def refused() -> bool:
                try:
                    return httpx.post(f"{gateway}/mcp", headers={"Authorization": f"Bearer {BOB_KEY}"},
                                      json={}).status_code == 401
                except httpx.HTTPError:
                    return False
            wait_until(refused, what="the keys file to be read again")
            with pytest.raises(Exception) as raised:
                await client.call_tool("time__get_current_time", {"timezone": "UTC"})
            return raised.value
        finally:
            keys_file.write_text(keys_text())
    _, error = with_client(f"{gateway}/mcp", BOB_KEY, "session", use)
    assert "invalid or missing API key" in str(error)  # the 401's own words


def test_a_person_s_own_credentials_reach_the_server_and_nobody_sees_them(gateway, mcp_stack):
    def token_answer(key: str) -> str:
        response = stateless(gateway, key, "tools/call", {"name": "tools__token", "arguments": {}})
        assert ERIN_TOKEN not in response.text and TOOLS_TOKEN not in response.text
        return response.json()["result"]["content"][0]["text"]
    assert token_answer(ALICE_KEY) == "token accepted"  # the server's own header
    assert stateless(gateway, ALICE_KEY, "tools/call", {"name": "tools2025__token", "arguments": {}}).json()[
        "result"]["content"][0]["text"] == "token accepted"  # (and a session-era server's)
    assert token_answer(ERIN_KEY) == "own token accepted"  # hers, in its place
    assert all(ERIN_TOKEN not in p.output() and TOOLS_TOKEN not in p.output() for p in mcp_stack[3])


def test_every_call_is_in_the_request_log_and_the_metrics(gateway, redis_client):
    assert stateless(gateway, CAROL_KEY, "tools/call", {"name": "time__get_current_time",
                                                       "arguments": {"timezone": "UTC"}}).status_code == 200
    stateless(gateway, CAROL_KEY, "tools/call", {"name": "git__git_log", "arguments": {"repo_path": "/"}})

    def records() -> list[dict]:  # (carol's: another test's record may land late)
        found = [dict(zip(FIELDS, json.loads(fields[b"r"]))) for _, fields in redis_client.xrange(REQUEST_LOG)]
        return [record for record in found if record["person"] == "carol"]
    wait_until(lambda: len(records()) >= 2, what="both calls' records")
    ok, denied = records()[:2]
    assert (ok["person"], ok["dialect"], ok["server"], ok["tool"], ok["status"], ok["finish"]) == \
        ("carol", "mcp", "time", "get_current_time", 200, "ok")
    assert ok["bytes_in"] == len(json.dumps({"timezone": "UTC"})) and ok["bytes_out"] > 0 and ok["total_ms"] > 0
    assert (denied["tool"], denied["finish"]) == ("git_log", "denied") and "git__git_log" in denied["error"]
    assert "UTC" not in json.dumps(ok)  # no arguments or results: carol's key keeps no bodies
    metrics = httpx.get(f"{gateway}/metrics", headers={"Authorization": f"Bearer {ALICE_KEY}"}).text
    assert 'switchboard_tool_calls_total{outcome="ok",server="time",tool="get_current_time"} 1.0' in metrics
    assert 'switchboard_tool_calls_total{outcome="denied",server="git",tool="-"} 1.0' in metrics


def test_tool_calls_have_a_rate_of_their_own(gateway):
    answers = [stateless(gateway, DAVE_KEY, "tools/call", {"name": "tools__say", "arguments": {"text": "x"}})
               for _ in range(3)]
    assert [a.status_code for a in answers] == [200, 200, 200]
    assert "result" in answers[1].json()
    error = answers[2].json()["error"]
    assert error["code"] == -32000 and "2 tool calls per minute" in error["message"]
    assert error["data"]["retryAfter"] >= 1


# The gateway's own server in either era: its call goes on the pool's relay (workers/mcp/http_relay.py).
UPSTREAM_ERAS = {"both-eras": "", "session-era": "2025"}


@pytest.mark.parametrize("upstream", UPSTREAM_ERAS)
def test_a_hung_server_is_timed_out_and_told_to_cancel(gateway, tool_server, upstream):
    seconds = 30 + len(UPSTREAM_ERAS[upstream])  # (one note each)
    response = stateless(gateway, ALICE_KEY, "tools/call", {"name": "slow", "arguments": {"seconds": seconds}},
                         path=f"/mcp/quick{UPSTREAM_ERAS[upstream]}")
    error = response.json()["error"]
    assert error["code"] == -32001 and "within 1 s" in error["message"]
    wait_until(lambda: f"slow {seconds}.0 cancelled" in notes(tool_server), what="the server to hear the cancel")


def notes(tool_server) -> str:
    return tool_server[1].read_text() if tool_server[1].exists() else ""


def slow_call(gateway: str, key: str, seconds: int, server: str = "tools") -> DroppableStream:
    """A stateless-era call of the tool server's `slow`, on a socket the test can drop."""
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"_meta": META, "name": f"{server}__slow", "arguments": {"seconds": seconds}}}
    headers = STATELESS_HEADERS | {"Mcp-Method": "tools/call", "Mcp-Name": f"{server}__slow",
                                   "Authorization": f"Bearer {key}"}
    return DroppableStream(gateway, "/mcp", body, headers)


@pytest.mark.parametrize("upstream", UPSTREAM_ERAS)
def test_a_client_that_leaves_cancels_its_call(gateway, tool_server, upstream):
    seconds = 31 + len(UPSTREAM_ERAS[upstream])
    stream = slow_call(gateway, ALICE_KEY, seconds, f"tools{UPSTREAM_ERAS[upstream]}")
    wait_until(lambda: f"slow {seconds}.0 started" in notes(tool_server), what="the slow call to start")
    stream.drop()
    wait_until(lambda: f"slow {seconds}.0 cancelled" in notes(tool_server), what="the server to hear the cancel")


def test_a_session_clients_cancellation_reaches_the_server(gateway, tool_server):
    async def use(client):
        with pytest.raises(MCPError):
            await client.call_tool("tools__slow", {"seconds": 32}, read_timeout_seconds=2)
    with_client(f"{gateway}/mcp", ALICE_KEY, "session", use)
    wait_until(lambda: "slow 32.0 cancelled" in notes(tool_server), what="the server to hear the cancel")


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("upstream", UPSTREAM_ERAS)
def test_progress_passes_through_as_the_call_runs(gateway, era, upstream):
    async def use(client):
        seen = []

        async def progress(value, total, message):
            seen.append((value, total, message))
        result = await client.call_tool(f"tools{UPSTREAM_ERAS[upstream]}__steps", {"count": 3},
                                        progress_callback=progress)
        return text_of(result), seen
    _, (answer, seen) = with_client(f"{gateway}/mcp", ALICE_KEY, era, use)
    assert answer == "3 steps" and seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]


def test_progress_is_framed_as_sse_events(gateway):
    response = stateless(gateway, ALICE_KEY, "tools/call", {"name": "tools__steps", "arguments": {"count": 2},
                                                           "_meta": META | {"progressToken": "p1"}})
    assert response.headers["content-type"].startswith("text/event-stream")
    events = [json.loads(line[6:]) for line in response.text.split("\n") if line.startswith("data: ")]
    assert [e.get("method") for e in events] == ["notifications/progress"] * 2 + [None]
    assert events[0]["params"] == {"progressToken": "p1", "progress": 2 - 1, "total": 2, "message": "step 1"}
    assert events[-1]["id"] == 1 and events[-1]["result"]["content"][0]["text"] == "2 steps"
    assert response.text.count("event: message\n") == 3


@pytest.mark.parametrize("era", ERAS)
def test_resources_and_prompts_pass_through(gateway, era):
    async def use(client):
        resources = [r.uri for r in (await client.list_resources()).resources]
        templates = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
        note = (await client.read_resource("notes://today")).contents[0].text
        day = (await client.read_resource("notes://day/monday")).contents[0].text
        prompts = [p.name for p in (await client.list_prompts()).prompts]
        review = (await client.get_prompt("tools__review", {"topic": "the gateway"})).messages[0].content.text
        return resources, templates, note, day, prompts, review
    _, (resources, templates, note, day, prompts, review) = with_client(f"{gateway}/mcp", ALICE_KEY, era, use)
    assert "notes://today" in [str(r) for r in resources] and "notes://day/{day}" in templates
    assert (note, day) == ("remember the milk", "note of monday")
    assert "tools__review" in prompts and "quick__review" in prompts and review == "Please review the gateway."


def test_resources_and_prompts_only_from_servers_a_key_may_use_whole(gateway):
    listed = stateless(gateway, CAROL_KEY, "prompts/list").json()["result"]["prompts"]
    assert listed == []  # carol has time whole (no prompts) and one git tool
    refused = stateless(gateway, CAROL_KEY, "resources/read", {"uri": "notes://today"}).json()["error"]
    assert refused["code"] == -32602 and "notes://today" in refused["message"]


def test_a_dead_stdio_server_is_started_again_on_the_next_call(gateway, mcp_stack):
    pool = next(p for p in mcp_stack[3] if p.name == "mcp-pool")
    call = lambda: stateless(gateway, ALICE_KEY, "tools/call", {"name": "time__get_current_time",
                                                                 "arguments": {"timezone": "UTC"}}).json()
    assert "result" in call()
    children = [c for c in psutil.Process(pool.popen.pid).children(recursive=True) if "mcp-server-time" in " ".join(c.cmdline())]
    assert children
    for child in children:
        child.kill()
    wait_until(lambda: "result" in call(), what="the time server to be started again")
    assert all(not c.is_running() or c.status() == psutil.STATUS_ZOMBIE for c in children)


@pytest.mark.parametrize("body", [
    b"", b"{", b"[]", b"null", b'{"jsonrpc":"2.0"}', b'{"jsonrpc":"2.0","id":{},"method":"x"}',
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":7}}',
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"time__x","arguments":"no"}}',
    b'{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":[1]}}',
    b'{"jsonrpc":"2.0","id":1,"method":"nothing/here"}',
    b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":5}}}',
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"' + b"a" * 100_000 + b'"}}',
], ids=["empty", "cut", "batch", "null", "no-method", "object-id", "number-name", "string-arguments",
        "list-uri", "unknown-method", "number-version", "huge-name"])
@pytest.mark.parametrize("era_headers", [STATELESS_HEADERS | {"Mcp-Method": "tools/list"},
                                         {"Accept": "application/json, text/event-stream"}], ids=["stateless", "session"])
def test_malformed_messages_get_errors_never_a_500(gateway, body, era_headers):
    headers = era_headers | {"Authorization": f"Bearer {ALICE_KEY}", "Content-Type": "application/json"}
    response = httpx.post(f"{gateway}/mcp", content=body, headers=headers)
    assert 400 <= response.status_code < 500 or "error" in response.json()
    assert response.status_code < 500


def test_get_offers_no_stream_and_delete_ends_a_session(gateway):
    assert httpx.get(f"{gateway}/mcp", headers={"Authorization": f"Bearer {ALICE_KEY}"}).status_code == 405
    auth = {"Authorization": f"Bearer {ALICE_KEY}", "Accept": "application/json, text/event-stream"}
    opened = httpx.post(f"{gateway}/mcp", headers=auth, json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    session = {"Mcp-Session-Id": opened.headers["Mcp-Session-Id"], "MCP-Protocol-Version": "2025-11-25"}
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    assert httpx.post(f"{gateway}/mcp", headers=auth | session, json=listing).status_code == 200
    assert httpx.post(f"{gateway}/mcp", headers={"Authorization": f"Bearer {BOB_KEY}"} | session,
                      json=listing).status_code == 404  # another key's session is no session
    assert httpx.delete(f"{gateway}/mcp", headers=auth | session).status_code == 204
    assert httpx.post(f"{gateway}/mcp", headers=auth | session, json=listing).status_code == 404
    assert httpx.post(f"{gateway}/mcp", headers=auth, json=listing).status_code == 400


def test_a_per_person_server_runs_once_per_person(gateway):
    def whoami(key: str) -> tuple[str, str]:
        response = stateless(gateway, key, "tools/call", {"name": "mine__whoami", "arguments": {}})
        person, pid = response.json()["result"]["content"][0]["text"].split()
        return person, pid
    alice, dave = whoami(ALICE_KEY), whoami(DAVE_KEY)
    assert (alice[0], dave[0]) == ("alice", "dave") and alice[1] != dave[1]
    assert whoami(ALICE_KEY) == alice  # her own process, kept


def another_web(mcp_stack, redis_url: str, **env: str):
    """A second web process of the MCP stack (its registry, keys and Redis)."""
    folder = mcp_stack[1]
    return start_web(stack_env(redis_url, SWITCHBOARD_MODELS=str(folder / "models.toml"),
                               SWITCHBOARD_KEYS_FILE=str(folder / "keys.toml"), TEST_TOOLS_TOKEN=TOOLS_TOKEN,
                               ERIN_TOOLS_TOKEN=ERIN_TOKEN, **env))


def test_a_session_opened_on_one_web_process_goes_on_on_another(gateway, mcp_stack, redis_url):
    """Sessions live in Redis: a web process restarting (here: another one) loses none."""
    other, other_base = another_web(mcp_stack, redis_url)
    try:
        auth = {"Authorization": f"Bearer {ALICE_KEY}", "Accept": "application/json, text/event-stream"}
        opened = httpx.post(f"{gateway}/mcp", headers=auth, json={
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
        session = {"Mcp-Session-Id": opened.headers["Mcp-Session-Id"], "MCP-Protocol-Version": "2025-11-25"}
        called = httpx.post(f"{other_base}/mcp", headers=auth | session, json={
            "jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "tools__say", "arguments": {"text": "still here"}}}, timeout=60)
        assert called.json()["result"]["content"][0]["text"] == "still here"
    finally:
        other.stop()


def test_the_console_shows_the_servers_and_who_used_which_tools(gateway, browser):
    assert "result" in stateless(gateway, CAROL_KEY, "tools/call", {"name": "time__get_current_time",
                                                                   "arguments": {"timezone": "UTC"}}).json()
    admin = {"Authorization": f"Bearer {ALICE_KEY}"}

    def console() -> dict:
        return httpx.get(f"{gateway}/admin/status", headers=admin).json()["mcp"]
    used = {"person": "carol", "server": "time", "tool": "get_current_time", "calls": 1}
    status = wait_until(lambda: (found := console())["tools_today"] == [used] and found, what="the day's tool use")
    servers = {server["name"]: server for server in status["servers"]}
    assert status["pools"] >= 1 and servers["mine"]["per_person"] and servers["tools"]["transport"] == "http"
    wait_until(lambda: {s["name"]: s for s in console()["servers"]}["time"]["state"] == "ok",
               what="the pool to say the time server answered")
    # The page an operator opens shows the same: the servers, their health, who used which tool today.
    browser.get(f"{gateway}/k/{ALICE_KEY}/admin")
    def time_server_ok() -> str:
        shown = text_of_page(browser, "#mcp-servers tbody")
        return any(row.startswith("time stdio ok ") for row in shown.splitlines()) and shown
    rows = wait_until(time_server_ok, what="the page to show the time server ok")
    assert "mine stdio (per person)" in rows and "tools http" in rows and "down http" in rows
    assert text_of_page(browser, "#mcp-tools tbody").split() == ["carol", "time", "get_current_time", "1"]
    assert text_of_page(browser, "#mcp-pools").lower() == f"{status['pools']} pool process(es)"  # (shown in capitals)


def test_a_keys_mcp_permissions_changing_is_audited(gateway, mcp_stack):
    keys_file = mcp_stack[1] / "keys.toml"
    keys_file.write_text(keys_text().replace('mcp_servers = ["time", "git/git_status"]', 'mcp_servers = ["time"]'))
    try:
        def changed() -> list[dict]:
            entries = httpx.get(f"{gateway}/admin/audit", headers={"Authorization": f"Bearer {ALICE_KEY}"}).json()
            return [e for e in entries["entries"] if e["action"] == "key changed" and e["target"] == "carol"]
        entry = wait_until(lambda: changed(), what="carol's change in the audit log")[0]
        assert entry["details"] == {"mcp_servers": [["time", "git/git_status"], ["time"]]}
    finally:
        keys_file.write_text(keys_text())


def test_a_tool_call_holds_one_of_the_persons_slots(gateway, tool_server, redis_client):
    """frank runs one thing at a time: while his tool call runs, his chat waits its turn, and runs once it ends."""
    stream = slow_call(gateway, FRANK_KEY, 33)
    wait_until(lambda: "slow 33.0 started" in notes(tool_server), what="his tool call to start")
    assert redis_client.zcard(active_key("frank")) == 1
    replies = []
    chat = threading.Thread(target=lambda: replies.append(httpx.post(
        f"{gateway}/v1/chat/completions", headers={"Authorization": f"Bearer {FRANK_KEY}"}, timeout=60,
        json={"model": "echo", "messages": [{"role": "user", "content": "after the tool"}]})))
    chat.start()
    wait_until(lambda: redis_client.hget(fair_waiting_key("mcp-local"), "frank") == b"1", what="his chat to wait")
    assert not replies
    stream.drop()  # the call is cancelled: his slot is free, and his chat gets a ticket
    chat.join(60)
    assert replies and replies[0].json()["choices"][0]["message"]["content"] == "after the tool"
    wait_until(lambda: redis_client.zcard(active_key("frank")) == 0, what="his slot to be free")


def test_a_tool_call_is_a_span_of_its_request_and_no_secret_is_traced(gateway, mcp_stack, redis_url):
    receiver = OtlpReceiver()
    web, base = another_web(mcp_stack, redis_url, OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url,
                            OTEL_BSP_SCHEDULE_DELAY="100", OTEL_SERVICE_NAME="gateway")
    try:
        assert "result" in stateless(base, ERIN_KEY, "tools/call", {"name": "tools__token", "arguments": {}}).json()
        spans = wait_until(lambda: len(s := receiver.snapshot()) >= 2 and s, 30, "the request's and the call's spans")
        one = {span["name"]: span for span in spans}
        request, call = one["POST /mcp"], one["execute_tool token"]
        assert call["parent_id"] == request["span_id"] and call["trace_id"] == request["trace_id"]
        assert call["attributes"] | {"switchboard.person": "erin"} == {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "token", "switchboard.mcp_server": "tools",
            "switchboard.person": "erin"}
        assert request["attributes"]["switchboard.person"] == "erin"
        sent = b"".join(receiver.bodies)
        assert all(secret.encode() not in sent for secret in (ERIN_KEY, ERIN_TOKEN, TOOLS_TOKEN))
    finally:
        web.stop()
        receiver.close()


TOOL_CALL = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
             "params": {"_meta": META, "name": "tools__say", "arguments": {"text": "x"}}}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {"roots": {}},
                         "clientInfo": {"name": "fuzz", "version": "1"}}}


@pytest.mark.parametrize("body, headers", [
    (TOOL_CALL, {"Mcp-Method": "tools/call", "Mcp-Name": "tools__say", "MCP-Protocol-Version": "2026-07-28"}),
    (INITIALIZE, {}),
], ids=["stateless-call", "initialize"])
def test_type_confused_values_in_every_position(gateway, body, headers):
    sent = headers | {"Authorization": f"Bearer {ALICE_KEY}", "Accept": "application/json, text/event-stream"}
    with httpx.Client(base_url=gateway, timeout=30) as http:
        assert http.post("/mcp", json=body, headers=sent).status_code == 200
        cases = list(mutants(body))
        statuses = [(what, http.post("/mcp", json=case, headers=sent).status_code) for what, case in cases]
    assert not [case for case in statuses if case[1] >= 500], [case for case in statuses if case[1] >= 500][:10]
    assert len(cases) > 50
