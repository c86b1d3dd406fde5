"""What a request says about how it should be routed, besides its
conversation: the client's own id for its session (Job.session, scoped to
its person when the job is submitted: app/jobs.py) and whether it is
background work (Job.background): calls an agent makes besides the turn a
person is watching, which wait behind every interactive turn in the fair
queue (jobqueue/fairqueue.py) and still run when the server has room.

Each dialect reads its hints from what it parsed (its `hints(request,
headers)`), and the view applies them to the job it translated:

- the session: Claude Code's X-Claude-Code-Session-Id (or the session_id in
  its `metadata.user_id`, a JSON string), Codex's `session-id`, or
  X-Session-Id;
- background work: a model asked for by Claude Code's small/fast alias
  (`claude-*haiku*`: titles, summaries of fetched pages), a call Codex marks
  as not a turn (`request_kind` in x-codex-turn-metadata: titles,
  compaction), a Responses request with `background: true`, counting a
  prompt's tokens, and probes of at most one token (Claude Code's quota
  check). (A model the operator marks `background = true` is the job
  queue's to add: app/asker.py.)
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Mapping

from protocol.contract import Job

SESSION_HEADERS = ("X-Claude-Code-Session-Id", "session-id", "session_id", "X-Session-Id")
SESSION_MOST = 128  # characters of a client's session id that are kept
SMALL_FAST_ALIAS = re.compile(r"claude-.*haiku", re.IGNORECASE)
CODEX_TURN_METADATA = "x-codex-turn-metadata"


@dataclass(frozen=True)
class Hints:
    session: str = ""  # the client's own id for its session ("": it names none)
    background: bool = False


def read(headers: Mapping[str, str], asked: str | None, user_id: str | None = None,
         flagged: bool = False) -> Hints:
    """A request's hints from its headers, the model it asked for, Claude
    Code's `metadata.user_id` and a dialect's own flag (Responses'
    `background`)."""
    background = flagged or (isinstance(asked, str) and bool(SMALL_FAST_ALIAS.match(asked))) or \
        codex_request_kind(headers.get(CODEX_TURN_METADATA)) not in (None, "turn")
    return Hints(client_session(headers, user_id) or "", background)


def apply(job: Job, hints: Hints) -> Job:
    """The job with its hints: the client's session (over one its view
    found: a chain of responses), background if the request or the job
    itself says so (a count, a probe of at most one token)."""
    job.session = hints.session or job.session
    probe = job.options.max_tokens is not None and job.options.max_tokens <= 1
    job.background = job.background or hints.background or job.count_only or probe
    return job


def client_session(headers: Mapping[str, str], user_id: str | None = None) -> str | None:
    """The client's own id for its session: Claude Code's and Codex's
    headers, or Claude Code's `metadata.user_id` (a JSON string naming it)."""
    for name in SESSION_HEADERS:
        if headers.get(name):
            return headers[name][:SESSION_MOST]
    if not isinstance(user_id, str) or not user_id.startswith("{"):
        return None
    try:
        session = json.loads(user_id).get("session_id")
    except (ValueError, AttributeError):
        return None
    return session[:SESSION_MOST] if isinstance(session, str) else None


def codex_request_kind(metadata: str | None) -> str | None:
    """What Codex says a call is for (`turn`: the one a person waits on)."""
    if not metadata:
        return None
    try:
        kind = json.loads(metadata).get("request_kind")
    except (ValueError, AttributeError):
        return None
    return kind if isinstance(kind, str) else None


def session_of(person: str, client_id: str) -> str:
    """A job's session (Job.session) as the queue and workers see it: the
    client's own id scoped to its person (another person's client sending
    the same id is another session), as a digest of fixed length."""
    return hashlib.sha256(f"{person}\n{client_id}".encode()).hexdigest()[:32]
