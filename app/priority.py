"""Which jobs are background work: calls an agent makes besides the turn a
person is watching, which wait behind every interactive turn in the fair
queue (BACKGROUND_OFFSET behind their fair tag: jobqueue/fairqueue.py) and
still run when the server has room (their patience, BACKGROUND_PATIENCE,
puts them ahead of chat once it runs out). They are charged to their
person's share as any job.

Background: a model the operator marks `background = true` (the agents'
small model), a model asked for by Claude Code's small/fast alias
(`claude-*haiku*`: titles, summaries of fetched pages), counting a prompt's
tokens, probes of at most one token (Claude Code's quota check), a call
Codex marks as not a turn (`request_kind` in x-codex-turn-metadata: titles,
compaction), and Responses with `background: true`.
"""
from __future__ import annotations

import json
import re

from flask import g, has_request_context, request

from catalog.registry import ModelEntry
from protocol.contract import Job

SMALL_FAST_ALIAS = re.compile(r"claude-.*haiku", re.IGNORECASE)
CODEX_TURN_METADATA = "HTTP_X_CODEX_TURN_METADATA"  # (its WSGI environ key: a header absent costs no KeyError)


def is_background(job: Job, entry: ModelEntry) -> bool:
    if job.count_only or entry.background:
        return True
    if job.options.max_tokens is not None and job.options.max_tokens <= 1:
        return True
    if not has_request_context():
        return False
    body = g.get("request_body")
    if isinstance(body, dict):
        asked = body.get("model")
        if body.get("background") is True or (isinstance(asked, str) and SMALL_FAST_ALIAS.match(asked)):
            return True
    return codex_request_kind(request.environ.get(CODEX_TURN_METADATA)) not in (None, "turn")


def codex_request_kind(metadata: str | None) -> str | None:
    """What Codex says a call is for (`turn`: the one a person waits on)."""
    if not metadata:
        return None
    try:
        kind = json.loads(metadata).get("request_kind")
    except (ValueError, AttributeError):
        return None
    return kind if isinstance(kind, str) else None
