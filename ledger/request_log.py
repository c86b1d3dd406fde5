"""The request log: one record per model request (time, person, model asked
and model that answered, dialect and route, status, finish reason, tokens,
time in queue, to first token and in all, tool rounds, trace and session,
what the guard found: {"action": "redacted", "kinds": {kind: count}}),
kept in Redis as a stream: its entry id is the request's end in milliseconds,
so a time range is a range of ids. Trimmed by age (SWITCHBOARD_REQUEST_LOG_DAYS)
and count (SWITCHBOARD_REQUEST_LOG_MAX) as it is written; the application
only appends to it.

A record is one stream field, "r": a JSON array of its values in FIELDS's
order (null when unknown; a field added later goes at the end, and older
records read it as null). One field rather than one per name: the web
process packs a command of 4 arguments instead of 47, a third of the cost
of writing a record, and the record costs its values only either way (a
stream keeps field names once per node). Bodies (the request and the
reply's text) are opt-in and kept apart, under their own expiry; keys and
headers are never among them.

A record is bounded: a client names its model, session and route and can
make an error's text long, so every text a record keeps is cut to TEXT_MOST
characters (an error's to ERROR_MOST), ending in "…" where it was cut. A
record stays a few hundred bytes whatever a client sends.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass

from redis import Redis
from redis.client import Pipeline

from protocol.keys import REQUEST_LOG, request_body_key

FIELDS = ("request", "person", "model", "answered", "dialect", "route", "transport", "status", "finish",
          "tokens_in", "tokens_out", "cached", "queue_ms", "ttft_ms", "total_ms", "tool_rounds", "server_tools",
          "tool_calls", "trace", "session", "error", "body", "priority", "server", "tool", "bytes_in",
          "bytes_out", "guard")
_BODY = FIELDS.index("body")
TEXT_MOST = 200  # characters of a text a record keeps (a model name, a session id, a route)
ERROR_MOST = 300  # of an error's text
SCAN_BATCH = 500
SCAN_MOST = 50_000  # records one read looks through for its matches (it says where to go on)


def append(pipe: Pipeline, record: dict, body: dict | None = None, body_days: int = 0) -> None:
    """Queue the record (and its body) on `pipe`; trim() after a batch."""
    values = [_value(record.get(name), ERROR_MOST if name == "error" else TEXT_MOST) for name in FIELDS]
    if body is not None:
        values[_BODY] = True
        pipe.set(request_body_key(record["request"]), json.dumps(body, ensure_ascii=False), ex=body_days * 86400)
    while values and values[-1] is None:  # (a record without the later fields is read with them null)
        values.pop()
    pipe.xadd(REQUEST_LOG, {"r": json.dumps(values, ensure_ascii=False, separators=(",", ":"))})


def trim(pipe: Pipeline, days: int, most: int) -> None:
    """Queue the log's trimming: by age exactly, by count approximately (whole nodes)."""
    pipe.xtrim(REQUEST_LOG, maxlen=most, approximate=True)
    pipe.xtrim(REQUEST_LOG, minid=int((time.time() - days * 86400) * 1000), approximate=False)


def _value(value, most: int):
    """What a record keeps of a value: times to a tenth of a millisecond,
    text to `most` characters, nothing empty."""
    if isinstance(value, float):
        return round(value, 1)
    if isinstance(value, str):
        return cut(value, most) if value else None
    return value


def cut(text: str, most: int) -> str:
    """The text, or its first `most` - 1 characters and an ellipsis."""
    return text if len(text) <= most else text[:most - 1] + "…"


@dataclass(frozen=True)
class Filter:
    person: str | None = None  # exactly
    model: str | None = None  # asked for, or answered
    status: str | None = None  # a code ("429"), a class ("4xx"), or "error" (>= 400, or ended in error)
    session: str | None = None  # the client's session id, exactly
    since_ms: int | None = None
    until_ms: int | None = None

    def matches(self, record: dict) -> bool:
        if self.person is not None and record["person"] != self.person:
            return False
        if self.model is not None and self.model not in (record["model"], record["answered"]):
            return False
        if self.session is not None and record["session"] != self.session:
            return False
        return self.status is None or _status_matches(self.status, record)


def _status_matches(wanted: str, record: dict) -> bool:
    status = record["status"] or 0
    if wanted == "error":
        return status >= 400 or record["finish"] == "error"
    if len(wanted) == 3 and wanted.endswith("xx"):
        return str(status).startswith(wanted[0])
    return str(status) == wanted


def read(redis: Redis, where: Filter, count: int = 100, before: str | None = None) -> tuple[list[dict], str | None]:
    """The newest records matching `where` (newest first, at most `count`),
    and where the next page starts (an entry id to pass as `before`; None:
    nothing older)."""
    high = f"({before}" if before else ("+" if where.until_ms is None else str(where.until_ms))
    low = "-" if where.since_ms is None else str(where.since_ms)
    found: list[dict] = []
    scanned = 0
    while scanned < SCAN_MOST:
        batch = redis.xrevrange(REQUEST_LOG, max=high, min=low, count=SCAN_BATCH)
        for entry_id, fields in batch:
            record = decode(entry_id, fields)
            if where.matches(record):
                found.append(record)
                if len(found) == count:
                    return found, record["id"]
        scanned += len(batch)
        if len(batch) < SCAN_BATCH:
            return found, None
        high = f"({batch[-1][0].decode()}"
    return found, high[1:]


def decode(entry_id: bytes, fields: dict) -> dict:
    record: dict = {"id": entry_id.decode(), "time": int(entry_id.split(b"-")[0]) / 1000}
    values = json.loads(fields.get(b"r", b"[]"))
    record |= dict(zip(FIELDS, values + [None] * (len(FIELDS) - len(values))))
    record["body"] = record["body"] is True
    return record


def body(redis: Redis, request_id: str) -> dict | None:
    raw = redis.get(request_body_key(request_id))
    return None if raw is None else json.loads(raw)

