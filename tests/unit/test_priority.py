"""Which jobs are background work (app/priority.py): the calls an agent makes
besides the turn a person watches, as Claude Code and Codex send them
(tests/fixtures); and the request log says which each request was."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from flask import Flask, g

from app.priority import codex_request_kind, is_background
from catalog.model_info import BackendSettings
from catalog.registry import ModelEntry
from ledger import request_log
from protocol.contract import DoneEvent, Job, Message, SamplingOptions, TextEvent, Usage

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CODEX = json.loads((FIXTURES / "codex-responses-request.json").read_text())
CLAUDE = json.loads((FIXTURES / "claude-code-messages-request.json").read_text())
TURN = Job(id="j", model="m", messages=[Message(role="user", content="hi")])
ENTRY = ModelEntry(name="m", backend="echo", pool="local", settings=BackendSettings())
SMALL = ModelEntry(name="small", backend="echo", pool="local", settings=BackendSettings(), background=True)


def _classified(body: dict, headers: dict | None = None, job: Job = TURN, entry: ModelEntry = ENTRY) -> bool:
    with Flask(__name__).test_request_context("/", method="POST", json=body, headers=headers or {}):
        g.request_body = body
        return is_background(job, entry)


@pytest.mark.parametrize("body, headers, job, entry, background", [
    (CLAUDE["body"], CLAUDE["headers"], TURN, ENTRY, False),  # Claude Code's turn
    (CLAUDE["body"] | {"model": "claude-haiku-4-5-20251001"}, CLAUDE["headers"], TURN, ENTRY, True),  # its small model
    (CLAUDE["body"] | {"model": "claude-3-5-haiku-latest"}, {}, TURN, ENTRY, True),
    (CLAUDE["body"], {}, TURN, SMALL, True),  # the model the operator marks as the agents' small one
    ({"model": "m"}, {}, TURN.model_copy(update={"options": SamplingOptions(max_tokens=1)}), ENTRY, True),  # a probe
    ({"model": "m"}, {}, TURN.model_copy(update={"options": SamplingOptions(max_tokens=2)}), ENTRY, False),
    ({"model": "m"}, {}, TURN.model_copy(update={"count_only": True}), ENTRY, True),  # count_tokens
    (CODEX["body"], CODEX["headers"], TURN, ENTRY, False),  # Codex's turn
    (CODEX["body"], CODEX["headers"] | {"x-codex-turn-metadata": json.dumps({"request_kind": "compact"})}, TURN,
     ENTRY, True),
    ({"model": "m", "input": "x", "background": True}, {}, TURN, ENTRY, True),  # a Responses background job
    ({"model": "m", "input": "x", "background": False}, {}, TURN, ENTRY, False),
], ids=["claude-turn", "claude-small-fast", "claude-haiku-alias", "marked-model", "probe", "two-tokens",
        "count-tokens", "codex-turn", "codex-compact", "responses-background", "responses-foreground"])
def test_what_is_background_work(body, headers, job, entry, background):
    assert _classified(body, headers, job, entry) is background


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
