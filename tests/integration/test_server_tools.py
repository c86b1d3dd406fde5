"""Server-side tools over MCP, end to end: the echo model "calls" a server
tool when the user's message holds an `<invoke>` block for it, the worker
runs it on a real MCP server, and the tool's result is the next round's
input, so the final answer is the tool's result. Driven as users drive
Switchboard: raw HTTP, the official openai and ollama clients, /chat/sse."""
from __future__ import annotations

import json
import signal
import threading
from datetime import datetime, timedelta, timezone

import httpx
import ollama
import openai
import pytest

from tests.integration.http import DroppableStream, post_raw
from tests.integration.mcp_stack import ALICE_KEY, BOB_KEY, CAROL_KEY, TOOLS_TOKEN, start_tool_server
from tests.integration.sse_rules import assert_well_formed
from tests.integration.waits import wait_until
from workers.backends.echo import echo_tokens
from workers.mcp.connection import MAX_RETRY_AFTER_SECONDS

ALICE = {"Authorization": f"Bearer {ALICE_KEY}"}


@pytest.fixture
def base(mcp_stack, clean_redis):
    return mcp_stack[0]


@pytest.fixture
def client(base):
    return openai.OpenAI(base_url=f"{base}/v1", api_key=ALICE_KEY, max_retries=0)


def notes(tool_server) -> str:
    """What the test tool server noted so far (nothing before its first slow call)."""
    path = tool_server[1]
    return path.read_text() if path.exists() else ""


def invoke(tool: str, /, **arguments) -> str:
    parameters = "".join(f'<parameter name="{k}">{v}</parameter>\n' for k, v in arguments.items())
    return f'<invoke name="{tool}">\n{parameters}</invoke>'


def user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def sse_parts(body: bytes) -> tuple[list[dict], list[dict]]:
    """(server_tool comments, data chunks) of an OpenAI stream, checking
    that every frame is a comment or a data object, ending in [DONE]."""
    assert b"\r" not in body
    frames = body.split(b"\n\n")
    assert frames[-2:] == [b"data: [DONE]", b""], frames[-3:]
    comments, chunks = [], []
    for frame in frames[:-2]:
        if frame.startswith(b": server_tool "):
            comments.append(json.loads(frame.removeprefix(b": server_tool ")))
        elif frame != b": keep-alive":
            assert frame.startswith(b"data: {"), frame
            chunks.append(json.loads(frame.removeprefix(b"data: ")))
    return comments, chunks


def streamed_text(chunks: list[dict]) -> str:
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])


# --- the done-when of the issue: curl asks for the time in Tokyo ---------------------
def test_time_in_tokyo_over_plain_http(base):
    call = invoke("get_current_time", timezone="Asia/Tokyo")
    body = {"model": "echo:tools", "stream": True, "stream_options": {"include_usage": True}, "messages": user(call)}
    status, headers, raw = post_raw(base, "/v1/chat/completions", body, ALICE)
    assert status == 200 and headers["Content-Type"].startswith("text/event-stream")
    comments, chunks = sse_parts(raw)
    assert_well_formed(chunks, include_usage=True)
    answer = json.loads(streamed_text(chunks))
    assert answer["timezone"] == "Asia/Tokyo"
    now_in_tokyo = datetime.now(timezone(timedelta(hours=9)))
    assert abs(datetime.fromisoformat(answer["datetime"]) - now_in_tokyo) < timedelta(minutes=2)
    assert answer["datetime"].endswith("+09:00")
    assert [(c["phase"], c["server"], c["name"]) for c in comments] == [
        ("call", "time", "get_current_time"), ("result", "time", "get_current_time")]
    assert comments[1]["status"] == "ok" and json.loads(comments[0]["arguments"]) == {"timezone": "Asia/Tokyo"}
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert not any("tool_calls" in c["choices"][0]["delta"] for c in chunks if c["choices"])
    # Two model rounds: the call, then the answer (echo's tokens are words).
    usage = chunks[-1]["usage"]
    assert usage["completion_tokens"] == len(echo_tokens(call)) + len(echo_tokens(streamed_text(chunks)))


# --- the official clients --------------------------------------------------------------
@pytest.mark.parametrize("model", ["echo:tools", "echo:gevent"], ids=["threads-worker", "gevent-worker"])
def test_openai_client_gets_the_tools_result_and_no_tool_call(client, model):
    reply = client.chat.completions.create(model=model, messages=user(invoke("say", text="hello from the tool")))
    message = reply.choices[0].message
    assert message.content == "hello from the tool" and message.tool_calls is None
    assert reply.choices[0].finish_reason == "stop"
    [activity] = reply.model_extra["server_tools"]
    assert activity["server"] == "tools" and activity["name"] == "say" and activity["status"] == "ok"


def test_openai_client_stream(client):
    stream = client.chat.completions.create(model="echo:gevent", stream=True,
                                            messages=user("Let me ask. " + invoke("say", text="streamed answer")))
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Let me ask. \n\nstreamed answer"
    assert all(not c.choices[0].delta.tool_calls for c in chunks if c.choices)


def test_ollama_client_parallel_calls(base):
    calls = invoke("say", text="first") + "\n" + invoke("say", text="second")
    lines = list(ollama.Client(host=base, headers=ALICE).chat(model="echo:tools", messages=user(calls), stream=True))
    assert "".join(line.message.content for line in lines) == "first\nsecond"
    assert all(not line.message.tool_calls for line in lines)
    assert lines[-1].done and lines[-1].done_reason == "stop"


def test_ollama_lines_carry_the_activity_as_an_extra_field(base):
    status, _, raw = post_raw(base, "/api/chat", {"model": "echo:tools", "messages": user(invoke("say", text="x"))},
                              ALICE)
    lines = [json.loads(line) for line in raw.split(b"\n")[:-1]]
    assert status == 200 and raw.endswith(b"\n")
    activity = [line["server_tool"] for line in lines if "server_tool" in line]
    assert [a["phase"] for a in activity] == ["call", "result"]
    assert all(line["message"] == {"role": "assistant", "content": ""} for line in lines if "server_tool" in line)
    assert "".join(line["message"]["content"] for line in lines) == "x"


def test_git_status_over_chat_sse(base, mcp_stack):
    repository = mcp_stack[1] / "repo"
    body = {"model": "echo:tools", "messages": user(invoke("git_status", repo_path=repository))}
    status, _, raw = post_raw(base, "/chat/sse", body, ALICE)
    frames = raw.split(b"\n\n")
    assert status == 200 and frames[-2:] == [b"data: [END]", b""]
    events = [json.loads(f.removeprefix(b"data: ")) for f in frames[:-2] if f.startswith(b"data: ")]
    text = "".join(e["message"]["content"] for e in events)
    assert "On branch main" in text and "notes.txt" in text
    assert [e["server_tool"]["name"] for e in events if "server_tool" in e] == ["git_status", "git_status"]
    assert [e["index"] for e in events] == list(range(len(events))) and events[-1]["done"]


def test_chat_sse_exact_text(base):
    status, _, raw = post_raw(base, "/chat/sse", {"model": "echo:gevent", "messages": user(invoke("say", text="ok"))},
                              ALICE)
    events = [json.loads(f.removeprefix(b"data: ")) for f in raw.split(b"\n\n") if f.startswith(b"data: {")]
    assert "".join(e["message"]["content"] for e in events) == "ok"
    assert all(set(e["message"]) == {"role", "content"} for e in events)


def test_simple_chat_whole_reply(base):
    reply = httpx.post(f"{base}/chat/completions", headers=ALICE, timeout=60,
                       json={"model": "echo:tools", "stream": False, "messages": user(invoke("say", text="plain"))})
    assert reply.status_code == 200 and reply.json()["message"]["content"] == "plain"
    assert [a["name"] for a in reply.json()["server_tools"]] == ["say"]


# --- the loop's rules ------------------------------------------------------------------
def test_a_chain_stops_at_the_step_limit(base):
    """echo:tools allows 3 rounds: chain(5) -> chain(4) -> chain(3); the
    fourth round gets no tools, and echo's answer is the last result as text."""
    status, _, raw = post_raw(base, "/v1/chat/completions", {"model": "echo:tools", "stream": True,
                                                               "messages": user(invoke("chain", n=5))}, ALICE)
    comments, chunks = sse_parts(raw)
    assert streamed_text(chunks) == invoke("chain", n=2)
    assert [json.loads(c["arguments"]) for c in comments if c["phase"] == "result"] == [{"n": 5}, {"n": 4}, {"n": 3}]
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop" and chunks[-1]["step_limit_reached"] is True


def test_a_chain_within_the_limit_ends_with_an_answer(client):
    reply = client.chat.completions.create(model="echo:tools", messages=user(invoke("chain", n=1)))
    assert reply.choices[0].message.content == "chain finished"
    assert [a["arguments"] for a in reply.model_extra["server_tools"]] == ['{"n": 1}', '{"n": 0}']
    assert "step_limit_reached" not in reply.model_extra


LOOKUP = {"type": "function", "function": {"name": "lookup", "parameters": {
    "type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}}


def test_a_server_round_then_a_client_tool_call(client):
    """The server tool's result holds a call of the client's tool: the turn
    ends with that call, exactly as without server tools."""
    client_call = '<tool_call>{"name": "lookup", "arguments": {"q": "tickets"}}</tool_call>'
    reply = client.chat.completions.create(model="echo:tools", tools=[LOOKUP],
                                           messages=user(invoke("say", text=client_call)))
    [call] = reply.choices[0].message.tool_calls
    assert reply.choices[0].finish_reason == "tool_calls"
    assert call.function.name == "lookup" and json.loads(call.function.arguments) == {"q": "tickets"}
    assert [a["name"] for a in reply.model_extra["server_tools"]] == ["say"]


def test_one_round_with_both_runs_only_the_client_call(client, tool_server):
    reply = client.chat.completions.create(
        model="echo:tools", tools=[LOOKUP],
        messages=user(invoke("slow", seconds=0.01) + "\n" + invoke("lookup", q="x")))
    assert [c.function.name for c in reply.choices[0].message.tool_calls] == ["lookup"]
    assert "server_tools" not in reply.model_extra
    assert "slow 0.01 started" not in notes(tool_server)


def test_a_client_tool_of_the_same_name_wins(client):
    say = {"type": "function", "function": {"name": "say", "parameters": {"type": "object"}}}
    reply = client.chat.completions.create(model="echo:tools", tools=[say], messages=user(invoke("say", text="hi")))
    assert [c.function.name for c in reply.choices[0].message.tool_calls] == ["say"]
    assert "server_tools" not in reply.model_extra


# --- failures become results the model sees ------------------------------------------
def test_a_failing_tool(client):
    reply = client.chat.completions.create(model="echo:tools", messages=user(invoke("fail", reason="test")))
    assert reply.choices[0].message.content == "Error executing tool fail"
    assert reply.model_extra["server_tools"][0]["status"] == "error"


def test_a_huge_result_is_cut(client):
    reply = client.chat.completions.create(model="echo:tools", messages=user(invoke("huge", chars=50000)))
    expected = ("0123456789" * 200) + "\n[result truncated: the first 2000 of 50000 characters]"
    assert reply.choices[0].message.content == expected
    activity = reply.model_extra["server_tools"][0]
    assert activity["truncated"] is True and activity["result_chars"] == 50000


def test_a_tool_that_times_out(client, tool_server):
    reply = client.chat.completions.create(model="echo:quick", messages=user(invoke("slow", seconds=20)))
    assert reply.choices[0].message.content == 'Error: the tool "slow" did not answer within 1 s and was cancelled.'
    assert reply.model_extra["server_tools"][0]["status"] == "timeout"
    wait_until(lambda: "slow 20.0 cancelled" in notes(tool_server), what="the server to see the cancel")


def test_keepalives_flow_while_a_tool_runs(base):
    """The stack's web process sends a keep-alive after 0.5 s of silence."""
    status, _, raw = post_raw(base, "/v1/chat/completions", {"model": "echo:tools", "stream": True,
                                                               "messages": user(invoke("slow", seconds=1.5))}, ALICE)
    frames = raw.split(b"\n\n")
    call = next(i for i, f in enumerate(frames) if f.startswith(b': server_tool {"phase":"call"'))
    result = next(i for i, f in enumerate(frames) if f.startswith(b': server_tool {"phase":"result"'))
    assert b": keep-alive" in frames[call:result]
    assert streamed_text(sse_parts(raw)[1]) == "slept 1.5 s"


def test_a_server_that_is_down_leaves_the_others_working(client):
    reply = client.chat.completions.create(model="echo:down", messages=user(invoke("say", text="still here")))
    assert reply.choices[0].message.content == "still here"


def test_abort_during_a_slow_tool_cancels_the_call(base, tool_server, redis_client):
    stream = DroppableStream(base, "/v1/chat/completions", {
        "model": "echo:tools", "stream": True, "messages": user(invoke("slow", seconds=30))}, ALICE)
    while b"server_tool" not in stream.read_line():
        pass
    # The call event goes out just before the call: drop only once the server
    # runs the tool (dropped sooner, the call is cancelled before it is sent).
    wait_until(lambda: "slow 30.0 started" in notes(tool_server), what="the slow tool to start")
    stream.drop()
    wait_until(lambda: "slow 30.0 cancelled" in notes(tool_server), what="the server to see the cancel")
    states = lambda: [redis_client.hget(k, "reason") for k in redis_client.scan_iter("switchboard:job:*:state")]
    wait_until(lambda: b"aborted" in states(), what="the job to be recorded as aborted")


def test_a_server_killed_mid_call_then_down_then_restarted(client, mcp_stack, tmp_path):
    port = mcp_stack[2]
    notes = tmp_path / "notes"
    server = start_tool_server(port, notes)

    def ask(text: str) -> str:
        return client.chat.completions.create(model="echo:killable", messages=user(text)).choices[0].message.content
    try:
        # The MCP pool has known it as down since the stack started (other tests list it): it is taken up once
        # its retry delay has passed, which doubles with each failure up to its maximum.
        wait_until(lambda: ask(invoke("say", text="up")) == "up", timeout=MAX_RETRY_AFTER_SECONDS + 30,
                   what="the started server to be used")
        replies = []
        call = threading.Thread(target=lambda: replies.append(ask(invoke("slow", seconds=30))))
        call.start()
        wait_until(lambda: notes.exists() and "started" in notes.read_text(), what="the slow call to start")
        server.stop(signal.SIGKILL)
        call.join(30)
        assert replies == ['Error: the MCP server "killable" closed the connection during the call.']
        # Down: its tools are still offered (the last listing), and a call says why it failed.
        assert ask(invoke("say", text="x")).startswith('Error: the MCP server "killable" is unavailable (cannot connect:')
        server = start_tool_server(port, notes)
        # Back: reconnected once the retry delay after the failure has passed.
        wait_until(lambda: ask(invoke("say", text="back")) == "back", what="the restarted server to be used")
    finally:
        server.stop()


# --- who may use what ------------------------------------------------------------------
def test_a_key_without_the_server_gets_no_server_tools(base):
    bob = openai.OpenAI(base_url=f"{base}/v1", api_key=BOB_KEY, max_retries=0)
    text = invoke("say", text="not for bob")
    reply = bob.chat.completions.create(model="echo:tools", messages=user(text))
    assert reply.choices[0].message.content == text and "server_tools" not in reply.model_extra
    # bob may use the time server
    reply = bob.chat.completions.create(model="echo:tools", messages=user(invoke("get_current_time", timezone="UTC")))
    assert json.loads(reply.choices[0].message.content)["timezone"] == "UTC"


def test_a_key_limited_to_some_tools_is_offered_only_those(base, mcp_stack):
    carol = openai.OpenAI(base_url=f"{base}/v1", api_key=CAROL_KEY, max_retries=0)
    repository = mcp_stack[1] / "repo"
    status = carol.chat.completions.create(model="echo:tools", messages=user(invoke("git_status", repo_path=repository)))
    assert "notes.txt" in status.choices[0].message.content  # git_status: hers
    text = invoke("git_log", repo_path=repository)
    log = carol.chat.completions.create(model="echo:tools", messages=user(text))
    assert log.choices[0].message.content == text  # git_log: not offered, so no call was made


def test_a_request_cannot_name_servers(client):
    text = invoke("say", text="no")
    reply = client.chat.completions.create(model="echo", messages=user(text),
                                           extra_body={"server_tools": ["tools"], "mcp_servers": ["tools"]})
    assert reply.choices[0].message.content == text


# --- what operators see ----------------------------------------------------------------
def test_metrics_and_logs(client, base, mcp_stack):
    client.chat.completions.create(model="echo:tools", messages=user(invoke("say", text="counted")),
                                   extra_headers={"X-Request-Id": "req-tools-1"})
    metrics = httpx.get(f"{base}/metrics", headers=ALICE).text
    assert 'switchboard_tool_calls_total{outcome="ok",server="tools",tool="say"} 1.0' in metrics
    assert 'switchboard_tool_call_seconds_count{server="tools",tool="say"} 1.0' in metrics
    web = mcp_stack[3][-1]
    line = wait_until(lambda: next((json.loads(l) for l in web.output().splitlines()
                                    if '"server_tool"' in l and "req-tools-1" in l), None), what="the log line")
    assert line["name"] == "say" and line["status"] == "ok" and "arguments" not in line
    assert line["client_request_id"] == "req-tools-1" != line["request_id"]  # (the server's own id, beside)
    records = [json.loads(line) for file in (mcp_stack[1] / "conversations").glob("*.jsonl")
               for line in file.read_text().splitlines()]
    record = next(r for r in records if r.get("client_request_id") == "req-tools-1")
    assert [t["name"] for t in record["server_tools"]] == ["say"] and record["reply"] == "counted"


def test_a_tool_list_that_changes_is_fetched_again(client):
    reply = client.chat.completions.create(model="echo:tools", messages=user(invoke("grow", name="sprout")))
    assert reply.choices[0].message.content == "added sprout"

    def sprout_answers():
        answer = client.chat.completions.create(model="echo:tools", messages=user(invoke("sprout")))
        return answer.choices[0].message.content == "sprout grown"
    wait_until(sprout_answers, what="the new tool to be offered")


def test_a_remote_servers_secret_header_reaches_it_and_nothing_else(client, mcp_stack):
    reply = client.chat.completions.create(model="echo:tools", messages=user(invoke("token")))
    assert reply.choices[0].message.content == "token accepted"
    missing = client.chat.completions.create(model="echo:quick", messages=user(invoke("token")))
    assert missing.choices[0].message.content == "no token"  # "quick" is configured without the header
    metrics = httpx.get(f"{mcp_stack[0]}/metrics", headers=ALICE).text
    assert all(TOOLS_TOKEN not in process.output() for process in mcp_stack[3]) and TOOLS_TOKEN not in metrics
