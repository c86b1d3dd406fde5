"""A worker's server-side tool calls through the MCP pool's contract
(workers/toolbox.py) on a real Redis, with a scripted pool in a thread of
the test: each reply reaches its own call, a listing is kept for a moment,
a call over the person's rate is not queued, a cancelled job cancels its
calls, and with no pool process a call says so at once."""
from __future__ import annotations

import json
import threading
import time
from concurrent.futures import CancelledError

import pytest
import redis

from catalog.mcp import McpServer
from protocol import keys
from protocol.contract import Job, Message, ToolSpec
from protocol.gateway import CALL_TIMEOUT, Call, Reply
from tests.conftest import clear_switchboard_keys
from workers.cancel import Cancel
from workers.toolbox import ServerTool, Toolbox

SERVERS = {"tools": McpServer(name="tools", url="http://127.0.0.1:9/mcp", timeout_seconds=5)}
SAY = ServerTool("tools", ToolSpec(name="say", parameters={"type": "object"}))


def job(**fields) -> Job:
    return Job(id="j", model="echo:tools", messages=[Message(role="user", content="hi")], usage_of="alice", **fields)


class ScriptedPool:
    """Announces itself as a live pool process and answers each call on the list with `answer(call)` (None:
    never answers); records the calls it took and the cancels it heard."""

    def __init__(self, redis, answer):
        self.redis, self.answer, self.calls, self.cancelled = redis, answer, [], []
        self._stop = threading.Event()
        self.redis.zadd(keys.MCP_POOLS, {"scripted": time.time() + 60})
        self._threads = [threading.Thread(target=self._take, daemon=True),
                         threading.Thread(target=self._hear_cancels, daemon=True)]
        for thread in self._threads:
            thread.start()

    def _take(self) -> None:
        while not self._stop.is_set():
            taken = self.redis.blpop([keys.MCP_CALLS], timeout=0.2)
            if taken is not None:
                call = Call.from_json(taken[1])
                self.calls.append(call)
                reply = self.answer(call)
                if reply is not None:
                    self.redis.publish(call.reply_channel, Reply("progress", {"progress": 1}).to_json())
                    self.redis.publish(call.reply_channel, reply.to_json())

    def _hear_cancels(self) -> None:
        pubsub = self.redis.pubsub(ignore_subscribe_messages=True)
        pubsub.subscribe(keys.mcp_cancel_channel())
        while not self._stop.is_set():
            message = pubsub.get_message(timeout=0.2)
            if message is not None:
                self.cancelled.append(message["data"].decode())
        pubsub.close()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(5)
        self.redis.zrem(keys.MCP_POOLS, "scripted")


@pytest.fixture
def own_redis(redis_url):
    """A database of these tests' own: the suite's MCP stack runs a real pool process on the suite's database,
    which would take the calls from the list (its channels are the suite's: pub/sub is server-wide)."""
    base, _, database = redis_url.rpartition("/")
    client = redis.Redis.from_url(f"{base}/{9 if int(database or 0) != 9 else 8}")
    clear_switchboard_keys(client)
    yield client
    clear_switchboard_keys(client)
    client.close()


@pytest.fixture
def toolbox(own_redis):
    """A worker's toolbox; its replies' listener stopped after the test."""
    made = Toolbox(own_redis, SERVERS, "w-test")
    yield made
    made.close()


@pytest.fixture
def pool(own_redis):
    started = []

    def start(answer) -> ScriptedPool:
        started.append(ScriptedPool(own_redis, answer))
        return started[-1]
    yield start
    for scripted in started:
        scripted.stop()


def said(call: Call) -> Reply:
    if call.method == "tools/list":
        return Reply("result", {"tools": [{"name": "say", "inputSchema": {"type": "object"}}]})
    time.sleep(0.05 if call.params["arguments"]["text"] == "slow" else 0)  # (the replies cross)
    return Reply("result", {"content": [{"type": "text", "text": call.params["arguments"]["text"]}]})


def test_each_reply_reaches_its_own_call_and_carries_the_persons_terms(toolbox, pool):
    scripted = pool(said)
    own = {"tools": {"Authorization": "ALICE_TOOLS"}}
    results = toolbox.call_all([(SAY, {"text": "slow"}), (SAY, {"text": "quick"})],
                               job(tool_credentials=own, traceparent="00-" + "1" * 32 + "-" + "2" * 16 + "-01"))
    assert [(r.text, r.outcome, r.status) for r in results] == [("slow", "ok", "ok"), ("quick", "ok", "ok")]
    assert {(c.person, json.dumps(c.own_headers_env), c.traceparent[:5]) for c in scripted.calls} == {
        ("alice", '{"Authorization": "ALICE_TOOLS"}', "00-11")}


def test_a_listing_is_kept_for_a_moment_per_person_and_server(toolbox, pool):
    scripted = pool(said)
    assert [t.spec.name for t in toolbox.offered(["tools", "unknown"], job())] == ["say"]
    assert [t.spec.name for t in toolbox.offered(["tools"], job())] == ["say"]
    assert [c.method for c in scripted.calls] == ["tools/list"]  # the second came from the one kept
    toolbox.offered(["tools"], job(tool_credentials={"tools": {"X": "V"}}))  # her own session: its own listing
    assert len(scripted.calls) == 2


def test_a_call_over_the_persons_tool_rate_is_not_queued(toolbox, pool):
    scripted = pool(said)
    results = toolbox.call_all([(SAY, {"text": str(n)}) for n in range(3)], job(tool_rates=[100, 2]))
    assert [r.outcome for r in results] == ["ok", "ok", "refused"]
    assert results[2].text.startswith("Error: rate limit reached: 2 tool calls per minute") and \
        results[2].status == "error"
    assert len(scripted.calls) == 2


def test_a_cancelled_job_cancels_its_calls_on_the_pool(toolbox, pool):
    scripted = pool(lambda call: None)  # it never answers
    cancel = Cancel()
    threading.Timer(0.3, cancel.set).start()
    with pytest.raises(CancelledError):
        toolbox.call_all([(SAY, {"text": "x"})], job(), cancel)
    deadline = time.monotonic() + 5
    while not scripted.cancelled and time.monotonic() < deadline:
        time.sleep(0.05)
    assert scripted.cancelled == [scripted.calls[0].id]


@pytest.mark.parametrize("code, text, outcome", [
    (CALL_TIMEOUT, 'Error: the tool "say" did not answer within 5 s and was cancelled.', "timeout"),
    (-32002, 'Error: the MCP server "tools" is unavailable (cannot connect).', "unavailable"),
    (-32602, 'Error: Unknown tool: "say".', "unknown"),
], ids=["timeout", "unavailable", "unknown"])
def test_a_pools_error_is_worded_for_the_model_and_recorded_as_the_gateway_records_it(toolbox, pool, code,
                                                                                      text, outcome):
    messages = {CALL_TIMEOUT: "timed out", -32002: 'the MCP server "tools" is unavailable (cannot connect)',
                -32602: 'Unknown tool: "say"'}
    pool(lambda call: Reply.error(code, messages[code]))
    result, = toolbox.call_all([(SAY, {"text": "x"})], job())
    assert (result.text, result.outcome) == (text, outcome)


def test_with_no_pool_process_a_call_says_so(toolbox, monkeypatch):
    monkeypatch.setattr("workers.toolbox.POOL_PATIENCE_SECONDS", 0.2)
    result, = toolbox.call_all([(SAY, {"text": "x"})], job())
    assert result.outcome == "unavailable" and "no MCP pool process is running" in result.text
