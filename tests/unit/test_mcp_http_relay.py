"""The MCP pool's relay of a tool call to a remote server
(workers/mcp/http_relay.py), against a scripted HTTP server on a real
loopback socket: each answer shape a server may give (JSON, SSE cut into
single bytes, errors, a redirect, an ended session), the server's own
requests answered, a kept-alive connection the server closed replaced, and
a cancelled call told to the server. That its requests are the SDK's is
tests/integration/test_mcp_relay.py."""
from __future__ import annotations

import asyncio
import json

import h11
import mcp_types
import pytest
from mcp.shared.exceptions import MCPError

from workers.mcp.http_relay import HttpRelay, Negotiated, NotRelayed, RelayFailed

MODERN = Negotiated("2026-07-28", None, {"name": "switchboard", "version": "1"}, {})
SESSION = Negotiated("2025-11-25", "session-1", {"name": "switchboard", "version": "1"}, {})
CALL = {"name": "say", "arguments": {"text": "hi"}}


def answer(request_id: str, result: dict | None = None, error: dict | None = None) -> dict:
    return {"jsonrpc": "2.0", "id": request_id} | ({"error": error} if error else {"result": result or {}})


def json_reply(message: dict, status: int = 200) -> tuple[int, list, list[bytes]]:
    return status, [("content-type", "application/json")], [json.dumps(message).encode()]


def sse_reply(*messages: dict) -> tuple[int, list, list[bytes]]:
    text = "".join(f"event: message\ndata: {json.dumps(m)}\n\n" for m in messages).encode()
    return 200, [("content-type", "text/event-stream")], [text[i:i + 1] for i in range(len(text))]  # byte by byte


class ScriptedServer:
    """Answers each request with `script(request_number, body)`: (status,
    headers, body pieces) written one piece at a time, or None to hang; with
    `close_after_each`, closes every connection once it answered."""

    def __init__(self, script, close_after_each: bool = False):
        self.script, self.close_after_each = script, close_after_each
        self.requests: list[tuple[dict, dict]] = []  # (headers, body) of each request
        self.connections = 0

    async def __aenter__(self) -> "ScriptedServer":
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/mcp"
        return self

    async def __aexit__(self, *exc) -> None:
        self.server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        state = h11.Connection(h11.SERVER)
        try:
            while True:
                request, body = await self._request(state, reader)
                if request is None:
                    return
                headers = {k.decode(): v.decode() for k, v in request.headers}
                self.requests.append((headers, json.loads(body)))
                reply = self.script(len(self.requests), json.loads(body))
                if reply is None:
                    await asyncio.sleep(3600)
                status, reply_headers, pieces = reply
                length = sum(len(piece) for piece in pieces)
                writer.write(state.send(h11.Response(status_code=status, headers=[
                    *reply_headers, ("content-length", str(length))])))
                for piece in pieces:
                    writer.write(state.send(h11.Data(data=piece)))
                    await writer.drain()
                writer.write(state.send(h11.EndOfMessage()))
                await writer.drain()
                if self.close_after_each:
                    return
                state.start_next_cycle()
        finally:
            writer.close()

    @staticmethod
    async def _request(state: h11.Connection, reader: asyncio.StreamReader):
        request, body = None, b""
        while True:
            event = state.next_event()
            if event is h11.NEED_DATA:
                data = await reader.read(65536)
                if not data:
                    return None, b""
                state.receive_data(data)
            elif isinstance(event, h11.Request):
                request = event
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                return request, body


async def relayed(server: ScriptedServer, session: Negotiated = MODERN, seen: list | None = None) -> dict:
    relay = HttpRelay(server.url, {"X-Token": "t"}, connect_timeout=5)

    async def progress(value, total, message):
        (seen if seen is not None else []).append((value, total, message))
    return await relay.call_tool(session, CALL, {}, progress)


def run(coroutine):
    return asyncio.run(coroutine)


def test_a_json_answer_is_the_result():
    async def scenario():
        async with ScriptedServer(lambda n, body: json_reply(answer(body["id"], {"content": []}))) as server:
            return await relayed(server), server.requests[0]
    result, (headers, body) = run(scenario())
    assert result == {"content": []}
    assert headers["x-token"] == "t" and headers["mcp-method"] == "tools/call" and headers["mcp-name"] == "say"
    assert body["params"]["_meta"]["progressToken"] == body["id"]


def test_progress_then_the_answer_over_sse_cut_into_bytes():
    def script(n, body):
        progress = {"jsonrpc": "2.0", "method": "notifications/progress",
                    "params": {"progressToken": body["id"], "progress": 1, "total": 2, "message": "one"}}
        other = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "else", "progress": 9}}
        log = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}}
        return sse_reply(progress, other, log, progress | {"params": progress["params"] | {"progress": 2}},
                         answer(body["id"], {"content": [{"type": "text", "text": "done"}]}))

    async def scenario():
        seen = []
        async with ScriptedServer(script) as server:
            return await relayed(server, seen=seen), seen
    result, seen = run(scenario())
    assert result["content"][0]["text"] == "done"
    assert seen == [(1, 2, "one"), (2, 2, "one")]


@pytest.mark.parametrize("reply, raised, says", [
    (lambda rid: json_reply(answer(rid, error={"code": -32602, "message": "Unknown tool"})), MCPError,
     "Unknown tool"),
    (lambda rid: json_reply(answer(rid, {"resultType": "input_required", "inputRequests": {}})), MCPError,
     "input_required"),
    (lambda rid: (500, [("content-type", "text/plain")], [b"boom"]), RelayFailed, "HTTP 500"),
    (lambda rid: json_reply(answer("another", {})), RelayFailed, "another request"),
    (lambda rid: (200, [("content-type", "application/json")], [b"not json"]), RelayFailed, "not JSON"),
    (lambda rid: (307, [("location", "/elsewhere")], [b""]), NotRelayed, "redirected"),
    (lambda rid: sse_reply({"jsonrpc": "2.0", "method": "notifications/message", "params": {}}), RelayFailed,
     "ended without an answer"),
], ids=["json-rpc-error", "input-required", "http-500", "wrong-id", "not-json", "redirect", "sse-without-answer"])
def test_what_is_not_a_result_is_an_error_naming_it(reply, raised, says):
    async def scenario():
        async with ScriptedServer(lambda n, body: reply(body["id"])) as server:
            await relayed(server)
    with pytest.raises(raised, match=says):
        run(scenario())


def test_a_session_the_server_ended_is_a_closed_connection():
    async def scenario():
        async with ScriptedServer(lambda n, body: (404, [("content-type", "application/json")], [b""])) as server:
            await relayed(server, SESSION)
    with pytest.raises(MCPError) as error:
        run(scenario())
    assert error.value.code == mcp_types.CONNECTION_CLOSED


def test_the_servers_ping_is_answered_and_its_other_requests_refused():
    def script(n, body):
        if n == 1:
            return sse_reply({"jsonrpc": "2.0", "id": 70, "method": "ping"},
                             {"jsonrpc": "2.0", "id": 71, "method": "sampling/createMessage", "params": {}},
                             answer(body["id"], {"content": []}))
        return 202, [], [b""]

    async def scenario():
        async with ScriptedServer(script) as server:
            await relayed(server, SESSION)
            for _ in range(200):  # (the answers go out beside the call)
                if len(server.requests) == 3:
                    break
                await asyncio.sleep(0.01)
            return server.requests[1:]
    answers = sorted((body for _, body in run(scenario())), key=lambda body: body["id"])
    assert answers[0] == {"jsonrpc": "2.0", "id": 70, "result": {}}
    assert answers[1]["id"] == 71 and answers[1]["error"]["code"] == mcp_types.METHOD_NOT_FOUND


def test_a_kept_alive_connection_the_server_closed_is_replaced():
    async def scenario():
        async with ScriptedServer(lambda n, body: json_reply(answer(body["id"], {"n": n})),
                                  close_after_each=True) as server:
            relay = HttpRelay(server.url, {}, connect_timeout=5)
            first = await relay.call_tool(MODERN, CALL, {}, None)
            await asyncio.sleep(0.05)  # (the close reaches the idle connection)
            second = await relay.call_tool(MODERN, CALL, {}, None)
            return first, second, server.connections
    assert run(scenario()) == ({"n": 1}, {"n": 2}, 2)


def test_a_kept_alive_connection_is_used_again():
    async def scenario():
        async with ScriptedServer(lambda n, body: json_reply(answer(body["id"], {"n": n}))) as server:
            relay = HttpRelay(server.url, {}, connect_timeout=5)
            for _ in range(3):
                await relay.call_tool(MODERN, CALL, {}, None)
            return server.connections
    assert run(scenario()) == 1


@pytest.mark.parametrize("session, told", [(SESSION, True), (MODERN, False)], ids=["session-era", "2026-07-28"])
def test_a_cancelled_call_closes_its_connection_and_the_session_era_is_told(session, told):
    def script(n, body):
        return None if n == 1 else (202, [], [b""])

    async def scenario():
        async with ScriptedServer(script) as server:
            relay = HttpRelay(server.url, {}, connect_timeout=5)
            call = asyncio.create_task(relay.call_tool(session, CALL, {}, None))
            while not server.requests:
                await asyncio.sleep(0.01)
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            for _ in range(100):
                if len(server.requests) > 1:
                    break
                await asyncio.sleep(0.01)
            return server.requests
    requests = run(scenario())
    called = requests[0][1]
    if told:
        headers, cancelled = requests[1]
        assert cancelled["method"] == "notifications/cancelled" and cancelled["params"]["requestId"] == called["id"]
        assert headers["mcp-session-id"] == "session-1"
    else:
        assert len(requests) == 1  # (closing the stream is the 2026-07-28 era's cancellation)
