"""A request's routing hints (dialects/hints.py), read by its dialect from
what it parsed: which jobs are background work (the calls an agent makes
besides the turn a person watches) and the client's session, as Claude Code
and Codex send them (tests/fixtures); the model the operator marks as the
agents' small one; and the request log says which each request was."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from werkzeug.datastructures import Headers

from dialects import anthropic, hints, ollama, openai, responses
from dialects.anthropic_schemas import CountTokensRequest, MessagesRequest
from dialects.hints import codex_request_kind
from dialects.ollama_schemas import ChatRequest as OllamaChatRequest
from dialects.openai_schemas import ChatCompletionRequest
from dialects.responses_schemas import ResponsesRequest
from ledger import request_log
from protocol.contract import Job, Message, SamplingOptions
from protocol.events import DoneEvent, TextEvent, Usage

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CODEX = json.loads((FIXTURES / "codex-responses-request.json").read_text())
CLAUDE = json.loads((FIXTURES / "claude-code-messages-request.json").read_text())
TURN = Job(id="j", model="m", messages=[Message(role="user", content="hi")])
CHAT = {"model": "m", "messages": [{"role": "user", "content": "x"}]}


def _hints(dialect, model, body: dict, headers: dict) -> hints.Hints:
    return dialect.hints(model.model_validate(body), Headers(headers))  # (Flask's headers: any case)


@pytest.mark.parametrize("dialect, model, body, headers, background", [
    (anthropic, MessagesRequest, CLAUDE["body"], CLAUDE["headers"], False),  # Claude Code's turn
    (anthropic, MessagesRequest, CLAUDE["body"] | {"model": "claude-haiku-4-5-20251001"}, CLAUDE["headers"], True),
    (anthropic, MessagesRequest, CLAUDE["body"] | {"model": "claude-3-5-haiku-latest"}, {}, True),
    (responses, ResponsesRequest, CODEX["body"], CODEX["headers"], False),  # Codex's turn
    (responses, ResponsesRequest, CODEX["body"], CODEX["headers"] | {
        "x-codex-turn-metadata": json.dumps({"request_kind": "compact"})}, True),
    (responses, ResponsesRequest, {"model": "m", "input": "x", "background": True}, {}, True),
    (responses, ResponsesRequest, {"model": "m", "input": "x", "background": False}, {}, False),
    (openai, ChatCompletionRequest, CHAT, {"X-Codex-Turn-Metadata": '{"request_kind": "title"}'}, True),
    (openai, ChatCompletionRequest, CHAT, {}, False),
], ids=["claude-turn", "claude-small-fast", "claude-haiku-alias", "codex-turn", "codex-compact",
        "responses-background", "responses-foreground", "codex-title-over-chat", "plain-chat"])
def test_what_each_dialect_reads_as_background_work(dialect, model, body, headers, background):
    assert _hints(dialect, model, body, headers).background is background


@pytest.mark.parametrize("job, background", [
    (TURN.model_copy(update={"options": SamplingOptions(max_tokens=1)}), True),  # a probe (Claude Code's quota check)
    (TURN.model_copy(update={"options": SamplingOptions(max_tokens=2)}), False),
    (TURN.model_copy(update={"count_only": True}), True),  # count_tokens
    (TURN, False),
], ids=["probe", "two-tokens", "count-tokens", "turn"])
def test_the_job_itself_may_be_background_work(job, background):
    assert hints.apply(job.model_copy(), hints.Hints()).background is background


def test_the_session_each_client_names():
    claude = _hints(anthropic, MessagesRequest, CLAUDE["body"], CLAUDE["headers"])
    assert claude.session == CLAUDE["headers"]["X-Claude-Code-Session-Id"]
    in_metadata = CLAUDE["body"] | {"metadata": {"user_id": json.dumps({"session_id": "s-123"})}}
    assert _hints(anthropic, MessagesRequest, in_metadata, {}).session == "s-123"
    assert _hints(anthropic, CountTokensRequest, CHAT, {"X-Session-Id": "c"}).session == "c"
    assert _hints(responses, ResponsesRequest, CODEX["body"], CODEX["headers"]).session == CODEX["headers"]["session-id"]
    assert _hints(ollama, OllamaChatRequest, CHAT, {}).session == ""
    assert len(_hints(openai, ChatCompletionRequest, CHAT, {"X-Session-Id": "s" * 500}).session) == hints.SESSION_MOST
    job = hints.apply(TURN.model_copy(update={"session": "response:resp_1"}), hints.Hints(session="mine"))
    assert job.session == "mine"  # the client's own, over one its view found (a chain of responses)
    assert hints.apply(TURN.model_copy(update={"session": "response:resp_1"}), hints.Hints()).session == \
        "response:resp_1"


def test_the_model_the_operator_marks_is_background_work(scripted, monkeypatch):
    services = scripted.client.application.extensions["switchboard"]
    echo = services.registry.get("echo")
    monkeypatch.setitem(services.registry._entries, "echo", echo.model_copy(update={"background": True}))
    scripted.replies.append([TextEvent(text="a"), DoneEvent(reason="stop", usage=Usage())])
    scripted.client.post("/v1/chat/completions", json=CHAT | {"model": "echo"}).close()
    assert scripted.jobs[-1][0].background is True


def test_codex_request_kind_from_its_metadata():
    assert codex_request_kind(CODEX["headers"]["x-codex-turn-metadata"]) == "turn"
    assert codex_request_kind(None) is None and codex_request_kind("{not json") is None
    assert codex_request_kind("[1]") is None and codex_request_kind('{"request_kind": 3}') is None


def test_a_probe_waits_as_background_and_the_request_log_says_so(scripted):
    done = DoneEvent(reason="stop", usage=Usage(prompt_tokens=1, completion_tokens=1))
    scripted.replies += [[TextEvent(text="a"), done], [TextEvent(text="a"), done]]
    for max_tokens in (1, 50):
        scripted.client.post("/v1/messages", json={"model": "echo", "max_tokens": max_tokens, "messages": [
            {"role": "user", "content": "quota"}]}).close()
    assert [job.background for job, _ in scripted.jobs] == [True, False]
    services = scripted.client.application.extensions["switchboard"]
    services.records.drain()
    records = request_log.read(services.redis, request_log.Filter())[0]
    assert [r["priority"] for r in records] == ["interactive", "background"]  # newest first
