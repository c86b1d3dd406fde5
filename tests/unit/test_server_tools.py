"""Server-side tools without servers: which calls are the server's, what the
client is shown of them (exact bytes per dialect), how results are cut,
metrics, keys. The loop against real MCP servers is in
tests/integration/test_server_tools.py."""
from __future__ import annotations

import json

import mcp_types
import pytest

from app.streaming import ndjson, sse, whole_reply
from catalog.echo import EchoSettings
from dialects import ollama_writer, openai_writer, simple_chat
from identity.keys import load_keys
from protocol.contract import Job, Message, ToolChoice, ToolSpec
from protocol.events import DoneEvent, ServerToolEvent, TextEvent, ToolCallEvent, decode_event, encode_event
from telemetry.metrics import count_tool_call, tool_calls
from workers.backends.echo import EchoBackend
from workers.toolbox import limited, result_text
from workers.model_output import NativeCall
from workers.toolcalls.emulation import ReplyFilter, plan_tools

SAY = ToolSpec(name="say", parameters={"type": "object", "properties": {"text": {"type": "string"}}})
LOOKUP = ToolSpec(name="lookup")
CALL = ServerToolEvent(phase="call", id="call_1", server="tools", name="say", arguments='{"text":"hi"}')
RESULT = CALL.model_copy(update={"phase": "result", "status": "ok", "seconds": 0.25, "result_chars": 2})
SUMMARY = ('{"phase":"result","id":"call_1","server":"tools","name":"say","arguments":"{\\"text\\":\\"hi\\"}",'
           '"status":"ok","seconds":0.25,"result_chars":2,"truncated":false}')


def job(tools=(), choice=ToolChoice()) -> Job:
    return Job(id="j", model="m", messages=[Message(role="user", content="go")], tools=list(tools), tool_choice=choice)


# --- the plan and the reply filter ----------------------------------------------------
def test_server_tools_are_offered_after_the_clients_and_a_clash_goes_to_the_client():
    client_say = ToolSpec(name="say", description="the client's own")
    plan = plan_tools(job([LOOKUP, client_say]), "emulated", "native", 25, [SAY, ToolSpec(name="grow")])
    assert [t.name for t in plan.tools] == ["lookup", "say", "grow"]
    assert plan.tools[1].description == "the client's own"
    assert plan_tools(job(choice=ToolChoice(mode="none")), "emulated", "native", 25, [SAY]).tools == []
    named = plan_tools(job(choice=ToolChoice(mode="function", name="say")), "emulated", "native", 25, [SAY])
    assert named.tools == [SAY] and named.forced


def split(pieces, parallel=True) -> tuple[list, ReplyFilter]:
    plan = plan_tools(job([LOOKUP]).model_copy(update={"parallel_tool_calls": parallel}), "emulated", "native", 25,
                      [SAY])
    replies = ReplyFilter(plan, frozenset({"say"}))
    events = [e for piece in pieces for e in replies.feed(piece)] + replies.finish()
    return events, replies


def test_server_calls_are_kept_aside_and_client_calls_count_from_zero():
    events, replies = split(['Checking. <invoke name="say">\n<parameter name="text">a</parameter>\n</invoke>\n',
                             '<invoke name="lookup">\n<parameter name="q">x</parameter>\n</invoke>'])
    assert [type(e) for e in events] == [TextEvent, ToolCallEvent]
    assert events[1].index == 0 and events[1].name == "lookup"
    assert [(c.name, json.loads(c.arguments)) for c in replies.server_calls] == [("say", {"text": "a"})]
    assert replies.calls == 1 and replies.any_calls == 2


def test_text_after_a_server_call_is_not_sent_and_one_call_means_one():
    events, replies = split(['<invoke name="say">\n<parameter name="text">a</parameter>\n</invoke> and more',
                             '<invoke name="say">\n<parameter name="text">b</parameter>\n</invoke>'], parallel=False)
    assert events == [] and [c.arguments for c in replies.server_calls] == ['{"text": "a"}']


def test_native_server_calls_are_kept_aside_too():
    plan = plan_tools(job([LOOKUP]), "native", "native", 25, [SAY])
    replies = ReplyFilter(plan, frozenset({"say"}))
    assert replies.feed(NativeCall("say", '{"text":"n"}', "call_n")) == []
    assert replies.server_calls[0].id == "call_n"


# --- echo answers a round of results ---------------------------------------------------
def test_echo_answers_every_result_of_the_last_round():
    messages = [Message(role="user", content="go"), Message(role="assistant", content="", tool_calls=[]),
                Message(role="tool", content="first"), Message(role="tool", content="second")]
    pieces = list(EchoBackend("echo", EchoSettings()).generate(Job(id="j", model="echo", messages=messages)))
    assert "".join(piece for piece in pieces if isinstance(piece, str)) == "first\nsecond"


# --- what clients see --------------------------------------------------------------------
def test_openai_shows_server_tools_as_comments_only():
    writer = openai_writer.ChatWriter("c", "m", 1)
    assert b"".join(map(sse, writer.server_tool(RESULT))) == b": server_tool " + SUMMARY.encode() + b"\n\n"
    finish = writer.finish(DoneEvent(reason="step_limit"))[0]
    assert finish["choices"][0]["finish_reason"] == "stop" and finish["step_limit_reached"] is True
    assert "step_limit_reached" not in writer.finish(DoneEvent(reason="stop"))[0]


@pytest.mark.parametrize("writer, line", [
    (ollama_writer.ChatWriter("m"), {"model": "m", "message": {"role": "assistant", "content": ""}, "done": False}),
    (simple_chat.LinesWriter("c", "m", 1), {"message": {"role": "assistant", "content": ""}, "done": False,
                                            "index": 0}),
], ids=["ollama", "simple-chat"])
def test_ndjson_dialects_show_server_tools_as_an_extra_field(writer, line):
    [frame] = writer.server_tool(RESULT)
    frame.pop("created_at", None)
    assert ndjson(frame) == json.dumps(line | {"server_tool": json.loads(SUMMARY)}, separators=(",", ":")).encode() \
        + b"\n"


@pytest.mark.parametrize("writer", [openai_writer.ChatWriter("c", "m", 1), ollama_writer.ChatWriter("m"),
                                    simple_chat.LinesWriter("c", "m", 1)], ids=["openai", "ollama", "simple-chat"])
def test_whole_replies_list_the_calls_that_ended(writer):
    events = [CALL, TextEvent(text="hi"), RESULT, DoneEvent(reason="stop")]
    reply = whole_reply(events, writer)
    assert reply["server_tools"] == [json.loads(SUMMARY)] and "step_limit_reached" not in reply


def test_the_event_travels():
    assert decode_event(encode_event(RESULT)) == RESULT


# --- results for the model -----------------------------------------------------------------
def test_result_text_names_what_is_not_text():
    """As the pool sends a result (the SDK's CallToolResult, dumped by alias)."""
    def wire(result: mcp_types.CallToolResult) -> dict:
        return result.model_dump(mode="json", by_alias=True, exclude_none=True)
    result = mcp_types.CallToolResult(content=[
        mcp_types.TextContent(type="text", text="line"),
        mcp_types.ImageContent(type="image", data="AAAA", mime_type="image/png"),
        mcp_types.ResourceLink(type="resource_link", uri="file:///a.txt", name="a")])
    assert result_text(wire(result)) == "line\n[image omitted: image/png]\n[resource: file:///a.txt]"
    structured = mcp_types.CallToolResult(content=[], structured_content={"a": 1})
    assert result_text(wire(structured)) == '{"a": 1}'


def test_limited():
    assert limited("abc", 3) == ("abc", False)
    assert limited("abcdef", 4) == ("abcd\n[result truncated: the first 4 of 6 characters]", True)


# --- operators -------------------------------------------------------------------------------
def test_tool_call_counts(clean_redis):
    count_tool_call(clean_redis, "tools", "say", "ok", 0.2)
    count_tool_call(clean_redis, "tools", "say", "timeout", 30.0)
    assert tool_calls(clean_redis) == {("tools", "say", "ok"): 1, ("tools", "say", "timeout"): 1}


def test_keys_file_limits_servers(tmp_path):
    path = tmp_path / "keys.toml"
    path.write_text('[keys.bob]\nsha256 = "00"\nmcp_servers = ["time", "git*"]\n\n[keys.ann]\nsha256 = "11"\n')
    bob, ann = load_keys(path, None)._keys
    assert [bob.grants.may_use_server(s) for s in ("time", "gitlab", "tools")] == [True, True, False]
    assert ann.grants.may_use_server("tools")
    denied_by_default = load_keys(path, None, mcp_default_deny=True)._keys
    assert [k.grants.may_use_server("tools") for k in denied_by_default] == [False, False]
    assert denied_by_default[0].grants.may_use("time", "get_current_time")  # bob names his


@pytest.mark.parametrize("table, error", [
    ('mcp_servers = ["a/b/c"]', "keys.bob.mcp_servers"),
    ("tool_calls_per_minute = 0", "keys.bob.tool_calls_per_minute"),
    ('mcp_headers_env = { tickets = "X" }', "keys.bob.mcp_headers_env"),
], ids=["bad-pattern", "zero-rate", "headers-not-a-table"])
def test_bad_mcp_settings_of_a_key_are_named(tmp_path, table, error):
    path = tmp_path / "keys.toml"
    path.write_text(f'[keys.bob]\nsha256 = "00"\n{table}\n')
    with pytest.raises(ValueError, match=error):
        load_keys(path, None)


def test_a_persons_own_credentials_are_named_per_server(tmp_path):
    path = tmp_path / "keys.toml"
    path.write_text('[keys.bob]\nsha256 = "00"\n[keys.bob.mcp_headers_env.tickets]\nAuthorization = "BOB_TICKETS"\n')
    bob = load_keys(path, None)._keys[0]
    assert bob.own_headers_env("tickets") == {"Authorization": "BOB_TICKETS"} and bob.own_headers_env("git") == {}
