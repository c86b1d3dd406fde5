"""The runner on fakeredis with scripted backends: events, abort, failures."""
from __future__ import annotations

import concurrent.futures
import json
import time
from contextlib import contextmanager
from dataclasses import replace

import fakeredis
import pytest

from catalog.model_info import BackendSettings
from catalog.registry import ModelEntry
from jobqueue import charges, fairqueue
from jobqueue.records import job_state
from ledger import usage
from protocol.contract import Job, Message, ToolChoice, ToolSpec
from protocol.events import Usage
from protocol.errors import BackendError, PromptTooLong, UnknownModel
from protocol.keys import fair_state_key, reply_channel
from protocol.presence import renew_web_lease
from workers.backends.base import Backend
from workers.cancel import Cancel
from workers.context import RunContext
from workers.heartbeat import Heartbeat
from workers.toolbox import ServerTool, ToolResult
from workers.model_output import Outcome, Prompted, Thinking
from workers.runner import run_job


class ScriptedBackend(Backend):
    """Yields its pieces; calls `on_piece(i)` before each; records closing."""

    def __init__(self, pieces, on_piece=lambda i: None, error: Exception | None = None):
        super().__init__("scripted", BackendSettings())
        self.pieces, self.on_piece, self.error, self.closed = pieces, on_piece, error, False

    def generate(self, job, cancel=None):
        self.job = job
        try:
            for i, piece in enumerate(self.pieces):
                self.on_piece(i)
                yield piece
            if self.error:
                raise self.error
            return Outcome("stop", 3, len(self.pieces))
        finally:
            self.closed = True


class OneBackend:
    def __init__(self, backend, **entry):
        self.backend = backend
        self._entry = ModelEntry(name="m", backend="scripted", pool="local", settings=BackendSettings(), **entry)

    def entry(self, model):
        return self._entry

    def get(self, model):
        return self.backend


class Flags:
    def __init__(self):
        self.flag = Cancel()

    @contextmanager
    def watch(self, job_id, taken_at):
        yield self.flag


JOB = Job(id="job1", model="m", messages=[Message(role="user", content="hi")], web_id="web-1",
          reply_channel=reply_channel("web-1", "job1"), expires_at=time.time() + 3600)
TOOL_JOB = JOB.model_copy(update={"tools": [ToolSpec(name="read_file", parameters={
    "type": "object", "properties": {"line": {"type": "integer"}}})]})


def run_taken(job: Job, ctx: RunContext, batch=None) -> str:
    """As a worker's slot runs a job: queued, taken (which starts it), run."""
    renew_web_lease(ctx.redis, job.web_id)
    fairqueue.push(ctx.redis, job, fairqueue.Asker("alice", 16), fairqueue.Placement("local"))
    taken = fairqueue.take(ctx.redis, "local", ctx.worker_id)
    assert taken.job == job
    return run_job(taken.job, ctx, taken.taken_at, batch)


def run(backend, flags=None, job=JOB, **settings):
    redis = fakeredis.FakeRedis()
    pubsub = redis.pubsub()
    pubsub.subscribe(JOB.reply_channel)
    pubsub.get_message()
    ctx = RunContext(redis=redis, backends=OneBackend(backend), aborts=flags or Flags(), worker_id="w",
                     heartbeat=Heartbeat(redis, "w"), **settings)
    reason = run_taken(job, ctx)
    events = []
    while (message := pubsub.get_message()) is not None:
        events.append(json.loads(message["data"]))
    return reason, events, job_state(redis, JOB.id)


def test_publishes_text_and_done():
    reason, events, state = run(ScriptedBackend(["a", "b"]))
    # Texts that pile up while a publish is in flight go out merged (workers/publisher.py):
    # on a loaded machine "a" and "b" may be one event.
    types = [e["type"] for e in events]
    assert types in (["text", "text", "done"], ["text", "done"])
    assert "".join(e["text"] for e in events if e["type"] == "text") == "ab"
    assert events[-1]["usage"] == {"prompt_tokens": 3, "completion_tokens": 2, "cached_tokens": None,
                                   "reasoning_tokens": 0}
    assert events[-1]["timings"]["total_ns"] >= events[-1]["timings"]["eval_ns"] >= 0
    assert reason == "stop" and state["status"] == "finished" and state["reason"] == "stop"


@pytest.mark.parametrize("think", [None, False], ids=["shown", "hidden"])
def test_thinking_counts_as_reasoning_tokens_shown_or_not(think):
    backend = ScriptedBackend([Thinking("weigh it up"), "4"])  # 11 characters: 3 tokens by the estimate
    _, events, _ = run(backend, job=JOB.model_copy(update={"think": think}))
    assert events[-1]["usage"]["reasoning_tokens"] == 3
    assert any(e["type"] == "thinking" for e in events) is (think is None)


def test_a_backends_own_reasoning_count_is_kept():
    class Counted(ScriptedBackend):
        def generate(self, job, cancel=None):
            outcome = yield from super().generate(job, cancel)
            return replace(outcome, reasoning_tokens=7)
    _, events, _ = run(Counted([Thinking("weigh it up"), "4"]))
    assert events[-1]["usage"]["reasoning_tokens"] == 7


def test_a_finished_jobs_usage_is_counted_with_its_final_write():
    redis = fakeredis.FakeRedis()
    pubsub = redis.pubsub()
    pubsub.subscribe(JOB.reply_channel)
    pubsub.get_message()
    ctx = RunContext(redis=redis, backends=OneBackend(ScriptedBackend(["a", "b"])), aborts=Flags(), worker_id="w",
                     heartbeat=Heartbeat(redis, "w"))
    assert run_taken(JOB.model_copy(update={"usage_of": "alice"}), ctx) == "stop"
    events = []
    while (message := pubsub.get_message()) is not None:
        events.append(json.loads(message["data"]))
    assert events[-1]["type"] == "done"
    assert usage.usage(redis).get("alice", {}).get("m") == {
        "requests": 1, "prompt_tokens": 3, "completion_tokens": 2, "errors": 0, "aborts": 0}
    debt = float(redis.hget(fair_state_key("local"), "debt:alice"))  # its cost settled in the same write
    assert debt == pytest.approx(charges.actual(Usage(prompt_tokens=3, completion_tokens=2)) - charges.estimate(JOB))


@pytest.mark.parametrize("asked", [True, False], ids=["asked", "not-asked"])
def test_the_prompts_size_goes_first_only_when_the_job_asks(asked):
    backend = ScriptedBackend([Prompted(3, 1), "a"])
    reason, events, _ = run(backend, job=JOB.model_copy(update={"report_prompt": asked}))
    prompt = [{"type": "prompt", "prompt_tokens": 3, "cached_tokens": 1}] if asked else []
    assert events[:-1] == prompt + [{"type": "text", "text": "a"}] and reason == "stop"
    assert events[-1]["usage"]["completion_tokens"] == 2  # (the scripted backend counts its pieces)


def test_a_token_count_generates_nothing_and_uses_no_budget():
    """count_tokens: the backend's count comes back as the prompt's usage; the
    person's usage of the day is untouched, and the web process told so."""
    redis = fakeredis.FakeRedis()
    pubsub = redis.pubsub()
    pubsub.subscribe(JOB.reply_channel)
    pubsub.get_message()
    backend = ScriptedBackend(["never"])
    backend.count_tokens = lambda job: 42
    ctx = RunContext(redis=redis, backends=OneBackend(backend), aborts=Flags(), worker_id="w",
                     heartbeat=Heartbeat(redis, "w"))
    job = JOB.model_copy(update={"usage_of": "alice", "count_only": True, "version": 3})
    assert run_taken(job, ctx) == "counted"
    events = [json.loads(message["data"]) for message in iter(pubsub.get_message, None)]
    assert [e["type"] for e in events] == ["done"]
    assert events[0]["usage"]["prompt_tokens"] == 42
    assert usage.usage(redis) == {}


def test_an_aborted_jobs_usage_is_left_to_its_web_process():
    """Its client left: the web process counts it (once: ledger/usage.py)."""
    redis, flags = fakeredis.FakeRedis(), Flags()
    backend = ScriptedBackend(list("abc"), on_piece=lambda i: i == 1 and flags.flag.set())
    ctx = RunContext(redis=redis, backends=OneBackend(backend), aborts=flags, worker_id="w",
                     heartbeat=Heartbeat(redis, "w"))
    assert run_taken(JOB.model_copy(update={"usage_of": "alice"}), ctx) == "aborted"
    assert usage.usage(redis) == {}


def test_with_a_batch_the_finished_jobs_writes_wait_for_the_caller():
    redis = fakeredis.FakeRedis()
    pubsub = redis.pubsub()
    pubsub.subscribe(JOB.reply_channel)
    pubsub.get_message()
    ctx = RunContext(redis=redis, backends=OneBackend(ScriptedBackend(["a"])), aborts=Flags(), worker_id="w",
                     heartbeat=Heartbeat(redis, "w"))
    batch = redis.pipeline(transaction=False)
    assert run_taken(JOB, ctx, batch) == "stop"
    published = []
    while (message := pubsub.get_message()) is not None:
        published.append(json.loads(message["data"])["type"])
    assert "done" not in published and job_state(redis, JOB.id)["status"] == "running"
    batch.execute()
    assert json.loads(pubsub.get_message()["data"])["type"] in ("text", "done")
    assert job_state(redis, JOB.id)["status"] == "finished"


def test_a_job_aborted_between_its_take_and_its_run_never_reaches_the_backend():
    flags = Flags()
    flags.flag.set()
    backend = ScriptedBackend(["a"])
    reason, events, state = run(backend, flags)
    assert reason == "aborted" and events == []
    assert state["status"] == "finished" and state["reason"] == "aborted"
    assert not backend.closed  # generate() was never called


def test_abort_mid_stream_stops_within_a_token_and_closes_the_backend():
    flags, asked = Flags(), []

    def on_piece(i):
        asked.append(i)
        if i == 2:
            flags.flag.set()

    backend = ScriptedBackend(list("abcdef"), on_piece=on_piece)
    reason, events, state = run(backend, flags)
    assert asked == [0, 1, 2]  # the piece during which the abort came is the last one asked for
    # Nothing from the abort on is published. Text still waiting in the
    # publisher when the abort comes is dropped (its client is gone), so what
    # went out is "ab", or less of it.
    assert "ab".startswith("".join(e["text"] for e in events if e["type"] == "text"))
    assert reason == "aborted" and state["reason"] == "aborted" and backend.closed


@pytest.mark.parametrize("error, message, status, sizes", [
    (BackendError("bad format", 400), "bad format", 400, (None, None)),
    (PromptTooLong("prompt too long", 9000, 8192), "prompt too long", 400, (9000, 8192)),
    (RuntimeError("secret internals"), "internal error while generating; see the worker log", 500, (None, None)),
], ids=["backend-error", "prompt-too-long", "crash"])
def test_failures_become_an_error_event(error, message, status, sizes):
    """A prompt over the context keeps its sizes, for each dialect to word."""
    reason, events, state = run(ScriptedBackend(["a"], error=error))
    assert events[-1] == {"type": "error", "message": message, "status": status, "retry_after": None,
                          "prompt_tokens": sizes[0], "context_tokens": sizes[1], "guard": None}
    assert reason == "error" and state["reason"] == "error"


def test_wall_time_cap_ends_the_job():
    reason, events, _ = run(ScriptedBackend(["a", "b", "c"]), max_job_seconds=0)
    assert [e["type"] for e in events] == ["text", "done"] and reason == "length"


def test_calls_in_the_reply_become_tool_call_events_and_text_after_them_is_dropped():
    pieces = ["Reading. ", '<invoke name="read_file"><parameter name="line">', '10</parameter></invoke>', " Done!"]
    reason, events, state = run(ScriptedBackend(pieces), job=TOOL_JOB)
    assert [e["type"] for e in events] == ["text", "tool_call", "done"]
    call = events[1]
    assert (call["index"], call["name"], call["arguments"]) == (0, "read_file", '{"line": 10}')
    assert call["id"].startswith("call_") and len(call["id"]) == 29
    assert reason == "tool_calls" and events[-1]["reason"] == "tool_calls" and state["reason"] == "tool_calls"


def test_the_backend_gets_the_tool_prompt_and_a_capped_token_limit():
    backend = ScriptedBackend(["ok"])
    run(backend, job=TOOL_JOB, max_job_tokens=50)
    assert backend.job.options.max_tokens == 50
    assert "## read_file" in backend.job.messages[0].content and backend.job.messages[0].role == "system"


def test_a_job_of_a_newer_contract_version_is_refused_with_a_clear_error():
    reason, events, state = run(ScriptedBackend(["x"]), job=JOB.model_copy(update={"version": 99}))
    assert reason == "error" and events[-1]["type"] == "error" and events[-1]["status"] == 500
    assert "the job is version 99: the worker must be upgraded" in events[-1]["message"]
    assert state["status"] == "finished" and state["reason"] == "error"


class NoModels(OneBackend):
    def entry(self, model):
        raise UnknownModel(model)


def test_a_model_this_workers_registry_lacks_is_answered_at_once_with_a_404():
    redis = fakeredis.FakeRedis()
    pubsub = redis.pubsub()
    pubsub.subscribe(JOB.reply_channel)
    pubsub.get_message()
    ctx = RunContext(redis=redis, backends=NoModels(ScriptedBackend([])), aborts=Flags(), worker_id="w1",
                     heartbeat=Heartbeat(redis, "w1"))
    assert run_taken(JOB, ctx) == "error"
    error = json.loads(pubsub.get_message()["data"])  # the web process answers with the 404's status
    assert error == {"type": "error", "status": 404, "retry_after": None, "message":
                     'model "m" is not served by any worker that took the job '
                     "(worker w1 has no such model in its registry)", "prompt_tokens": None, "context_tokens": None,
                     "guard": None}


# --- server-side tools: the rounds of one job ---------------------------------------------
class RoundsBackend(Backend):
    """Round n answers rounds[n]; records the job of each round."""

    reads_prompt = False

    def __init__(self, rounds):
        super().__init__("rounds", BackendSettings())
        self.rounds, self.jobs = rounds, []

    def generate(self, job, cancel=None):
        self.jobs.append(job)
        pieces = self.rounds[len(self.jobs) - 1]
        yield from pieces
        return Outcome("stop", 3, len(pieces))


class FakeToolbox:
    """`say` answers "said <text>"; `on_call` runs first (to cancel the job)."""

    def __init__(self, on_call=lambda: None):
        self.on_call, self.calls = on_call, []

    def offered(self, servers, job, cancel=None):
        return [ServerTool("tools", ToolSpec(name="say", parameters={"type": "object"}))]

    def call_all(self, calls, job, cancel=None):
        self.on_call()
        if cancel is not None and cancel.is_set():
            raise concurrent.futures.CancelledError()
        self.calls += [arguments for _, arguments in calls]
        return [ToolResult(f"said {arguments['text']}", "ok", 0.01) for _, arguments in calls]


SAY_CALL = '<invoke name="say">\n<parameter name="text">a</parameter>\n</invoke>'
SERVER_JOB = JOB.model_copy(update={"server_tools": ["tools"]})


def run_rounds(backend, toolbox, job=SERVER_JOB, flags=None):
    redis = fakeredis.FakeRedis()
    pubsub = redis.pubsub()
    pubsub.subscribe(JOB.reply_channel)
    pubsub.get_message()
    ctx = RunContext(redis=redis, backends=OneBackend(backend, mcp_servers=("tools",)), aborts=flags or Flags(),
                     worker_id="w", heartbeat=Heartbeat(redis, "w"), toolbox=toolbox)
    reason = run_taken(job, ctx)
    events = []
    while (message := pubsub.get_message()) is not None:
        events.append(json.loads(message["data"]))
    return reason, events


def test_a_server_call_round_then_the_answer():
    backend, toolbox = RoundsBackend([["Looking. ", SAY_CALL], ["done"]]), FakeToolbox()
    reason, events = run_rounds(backend, toolbox)
    assert reason == "stop" and toolbox.calls == [{"text": "a"}]
    assert [(e["type"], e.get("text") or e.get("phase")) for e in events[:-1]] == [
        ("text", "Looking. "), ("server_tool", "call"), ("server_tool", "result"),
        ("text", "\n\ndone")]
    assert events[-1]["usage"] == {"prompt_tokens": 6, "completion_tokens": 3, "cached_tokens": None,
                                   "reasoning_tokens": 0}
    said, result = backend.jobs[1].messages[-2:]
    assert said.role == "assistant" and said.content == "Looking. " and said.tool_calls[0].name == "say"
    assert result.role == "tool" and result.content == "said a" and result.tool_call_id == said.tool_calls[0].id


def test_a_forced_call_made_on_the_server_lets_the_next_round_answer():
    job = SERVER_JOB.model_copy(update={"tool_choice": ToolChoice(mode="required")})
    backend = RoundsBackend([[SAY_CALL], ["answer"]])
    reason, events = run_rounds(backend, FakeToolbox(), job=job)
    assert reason == "stop" and backend.jobs[1].tool_choice.mode == "auto"


def test_a_job_without_the_server_gets_no_server_tools():
    backend, toolbox = RoundsBackend([[SAY_CALL]]), FakeToolbox()
    reason, events = run_rounds(backend, toolbox, job=JOB)
    assert reason == "stop" and toolbox.calls == [] and events[0]["text"] == SAY_CALL


def test_cancelled_during_a_server_call():
    flags = Flags()
    reason, events = run_rounds(RoundsBackend([[SAY_CALL], ["never"]]), FakeToolbox(flags.flag.set), flags=flags)
    assert reason == "aborted" and all(e.get("text") != "never" for e in events)
