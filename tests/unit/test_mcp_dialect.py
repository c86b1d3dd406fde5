"""The MCP gateway's dialect (dialects/mcp.py) and a key's MCP grants
(catalog.mcp.Grants): parsing, eras, the stateless era's checks, naming,
listings and results per era."""
from __future__ import annotations

import pytest

from catalog.mcp import Grants, check_grant_pattern
from dialects import mcp
from dialects.mcp import Message, Names, RpcError

META = {mcp.PROTOCOL_VERSION_META: "2026-07-28", mcp.CLIENT_CAPABILITIES_META: {}}


@pytest.mark.parametrize("patterns, server, tool, allowed", [
    (("*",), "git", "git_commit", True),
    (("time",), "time", "get_current_time", True),
    (("time",), "git", "git_status", False),
    (("git/git_status",), "git", "git_status", True),
    (("git/git_status",), "git", "git_commit", False),
    (("git/git_*",), "git", "git_log", True),
    (("g*/status",), "git", "status", True),
    ((), "time", "get_current_time", False),
], ids=["all", "server", "other-server", "one-tool", "not-that-tool", "tool-pattern", "both-patterns", "none"])
def test_grants_decide_tools(patterns, server, tool, allowed):
    assert Grants(patterns).may_use(server, tool) is allowed


def test_grants_on_a_server():
    grants = Grants(("time", "git/git_status", "g*/git_log"))
    assert grants.may_use_server("git") and grants.may_use_server("time")
    assert not grants.may_use_server("tickets")
    assert grants.whole_server("time") and not grants.whole_server("git")
    assert grants.for_server("time") == ["time"]
    assert grants.for_server("git") == ["git/git_status", "git/git_log"]
    assert grants.for_server("tickets") == []


@pytest.mark.parametrize("pattern", ["", "/tool", "a/b/c", 3], ids=["empty", "no-server", "two-slashes", "number"])
def test_bad_grant_patterns_are_named(pattern):
    with pytest.raises(ValueError, match="server/tool"):
        check_grant_pattern(pattern)


@pytest.mark.parametrize("body, code", [
    (b"{", mcp.PARSE_ERROR),
    (b"[]", mcp.INVALID_REQUEST),
    (b'{"jsonrpc": "1.0", "method": "ping", "id": 1}', mcp.INVALID_REQUEST),
    (b'{"jsonrpc": "2.0", "method": "ping", "id": true}', mcp.INVALID_REQUEST),
    (b'{"jsonrpc": "2.0", "method": "ping", "id": 1.5}', mcp.INVALID_REQUEST),
    (b'{"jsonrpc": "2.0", "method": 7, "id": 1}', mcp.INVALID_REQUEST),
    (b'{"jsonrpc": "2.0", "method": "ping", "id": 1, "params": []}', mcp.INVALID_PARAMS),
    (b'"hello"', mcp.INVALID_REQUEST),
], ids=["not-json", "batch", "wrong-version", "bool-id", "float-id", "number-method", "list-params", "string"])
def test_malformed_messages_are_named(body, code):
    with pytest.raises(RpcError) as raised:
        mcp.parse_message(body)
    assert raised.value.code == code


def test_messages_of_each_kind():
    request = mcp.parse_message(b'{"jsonrpc":"2.0","id":"a","method":"tools/list","params":{"cursor":null}}')
    assert request.is_request and request.id == "a" and request.params == {"cursor": None}
    notification = mcp.parse_message(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    assert not notification.is_request
    response = mcp.parse_message(b'{"jsonrpc":"2.0","id":3,"result":{}}')
    assert response.method is None and not response.is_request


@pytest.mark.parametrize("header, meta, era", [
    (None, {}, "session"),
    ("2025-11-25", {}, "session"),
    ("2026-07-28", {}, "stateless"),
    (None, META, "stateless"),
    ("2025-06-18", META, "session"),
], ids=["nothing", "session-header", "stateless-header", "stateless-meta", "header-wins"])
def test_the_era_is_what_the_client_sends(header, meta, era):
    assert mcp.era_of(Message("tools/list", 1, {"_meta": meta}, True), header) == era


def _headers(**values):
    lowered = {k.replace("_", "-").lower(): v for k, v in values.items()}
    return lambda name: lowered.get(name.lower())


def test_a_stateless_request_that_agrees_with_itself():
    message = Message("tools/call", 1, {"name": "time__now", "_meta": META}, True)
    headers = _headers(mcp_protocol_version="2026-07-28", mcp_method="tools/call", mcp_name="time__now")
    assert mcp.check_stateless(message, headers) == "2026-07-28"


@pytest.mark.parametrize("params, headers, code", [
    ({}, dict(mcp_protocol_version="2026-07-28", mcp_method="tools/list"), mcp.INVALID_PARAMS),
    ({"_meta": {mcp.PROTOCOL_VERSION_META: "2026-07-28"}},
     dict(mcp_protocol_version="2026-07-28", mcp_method="tools/list"), mcp.INVALID_PARAMS),
    ({"_meta": META}, dict(mcp_method="tools/list"), mcp.HEADER_MISMATCH),
    ({"_meta": META}, dict(mcp_protocol_version="2026-07-28", mcp_method="prompts/list"), mcp.HEADER_MISMATCH),
    ({"_meta": {**META, mcp.PROTOCOL_VERSION_META: "2027-01-01"}},
     dict(mcp_protocol_version="2027-01-01", mcp_method="tools/list"), mcp.UNSUPPORTED_PROTOCOL_VERSION),
], ids=["no-meta", "no-capabilities", "no-version-header", "wrong-method-header", "unknown-version"])
def test_stateless_checks_name_what_is_wrong(params, headers, code):
    with pytest.raises(RpcError) as raised:
        mcp.check_stateless(Message("tools/list", 1, params, True), _headers(**headers))
    assert raised.value.code == code


def test_a_call_whose_name_header_differs_is_refused():
    message = Message("tools/call", 1, {"name": "time__now", "_meta": META}, True)
    headers = _headers(mcp_protocol_version="2026-07-28", mcp_method="tools/call", mcp_name="git__git_log")
    with pytest.raises(RpcError) as raised:
        mcp.check_stateless(message, headers)
    assert raised.value.code == mcp.HEADER_MISMATCH and "Mcp-Name" in raised.value.message


@pytest.mark.parametrize("asked, agreed", [("2025-06-18", "2025-06-18"), ("2099-01-01", "2025-11-25"),
                                           (None, "2025-11-25")], ids=["known", "unknown", "none"])
def test_the_session_era_agrees_a_version(asked, agreed):
    assert mcp.initialize_result(asked, "")["protocolVersion"] == agreed


def test_names_on_the_shared_endpoint_and_on_one_server():
    shared = Names(("git", "git__x", "time"), single=False)
    assert shared.outward("time", "get_current_time") == "time__get_current_time"
    assert shared.inward("time__get_current_time") == ("time", "get_current_time")
    assert shared.inward("git__x__status") == ("git__x", "status")  # the longest server name that fits
    assert shared.inward("git__git_status") == ("git", "git_status")
    assert shared.inward("tickets__read") is None and shared.inward("time__") is None
    one = Names(("time",), single=True)
    assert one.outward("time", "now") == "now" and one.inward("now") == ("time", "now")


def test_a_merged_listing_is_renamed_and_filtered():
    listings = {"time": [{"name": "now", "inputSchema": {}}],
                "git": [{"name": "git_status", "inputSchema": {}}, {"name": "git_commit", "inputSchema": {}}]}
    names = Names(("git", "time"), single=False)
    merged = mcp.merged_listing("tools/list", listings, names, lambda server, item: item["name"] != "git_commit")
    assert merged == {"tools": [{"name": "git__git_status", "inputSchema": {}},
                                {"name": "time__now", "inputSchema": {}}]}


def test_results_per_era():
    upstream = {"tools": [], "resultType": "complete", "ttlMs": 5, "cacheScope": "public",
                "_meta": {mcp.SERVER_INFO_META: {"name": "upstream"}, "other": 1}}
    assert mcp.for_era("session", "tools/list", upstream) == {"tools": [], "_meta": {"other": 1}}
    stateless = mcp.for_era("stateless", "tools/list", upstream)
    assert stateless["resultType"] == "complete" and stateless["cacheScope"] == "private"
    assert stateless["ttlMs"] == mcp.LISTING_TTL_MS
    assert stateless["_meta"] == {"other": 1, mcp.SERVER_INFO_META: mcp.SERVER_INFO}
    called = mcp.for_era("stateless", "tools/call", {"content": []})
    assert "ttlMs" not in called and called["resultType"] == "complete"


@pytest.mark.parametrize("params, error", [
    ({}, '"params.name"'), ({"name": 3}, '"params.name"'), ({"name": "time__now", "arguments": [1]}, "arguments"),
    ({"name": "tickets__read"}, 'Unknown tool: "tickets__read"'),
], ids=["no-name", "number-name", "list-arguments", "unknown"])
def test_call_targets_name_what_is_wrong(params, error):
    with pytest.raises(RpcError, match=error) as raised:
        mcp.call_target(Message("tools/call", 1, params, True), Names(("time",), single=False))
    assert raised.value.code == mcp.INVALID_PARAMS


def test_upstream_params_carry_the_servers_own_name_and_no_envelope():
    message = Message("tools/call", 1, {"name": "time__now", "arguments": {"a": 1}, "_meta": META}, True)
    assert mcp.upstream_params(message, "now") == {"name": "now", "arguments": {"a": 1}}


@pytest.mark.parametrize("era, code, status", [
    ("stateless", mcp.METHOD_NOT_FOUND, 404), ("stateless", mcp.HEADER_MISMATCH, 400),
    ("stateless", -32001, 200), ("session", mcp.METHOD_NOT_FOUND, 200), ("session", mcp.PARSE_ERROR, 400),
], ids=["stateless-unknown-method", "stateless-mismatch", "stateless-timeout", "session-unknown", "session-parse"])
def test_error_statuses_per_era(era, code, status):
    assert mcp.error_status(era, RpcError(code, "x")) == status
