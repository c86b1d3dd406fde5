"""The request log: one record per model request (time, person, model asked
and model that answered, dialect and route, status, finish reason, tokens,
time in queue, to first token and in all, tool rounds, trace and session),
kept in Redis as a stream: its entry id is the request's end in milliseconds,
so a time range is a range of ids. Trimmed by age (SWITCHBOARD_REQUEST_LOG_DAYS)
and count (SWITCHBOARD_REQUEST_LOG_MAX) as it is written; the application
only appends to it.

A record is one stream field, "r": a JSON array of its values in FIELDS's
order (null when unknown; a field added later goes at the end, and older
records read it as null). One field rather than one per name: the web
process packs a command of 4 arguments instead of 47, a third of the cost
of writing a record, and the record costs its values only either way (a
stream keeps field names once per node). Records written with a field per
name (the first release) are read as well. Bodies (the request and the
reply's text) are opt-in and kept apart, under their own expiry; keys and
headers are never among them.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass

from redis import Redis
from redis.client import Pipeline

from protocol.keys import PREFIX

LOG = f"{PREFIX}:requests"
FIELDS = ("request", "person", "model", "answered", "dialect", "route", "transport", "status", "finish",
          "tokens_in", "tokens_out", "cached", "queue_ms", "ttft_ms", "total_ms", "tool_rounds", "server_tools",
          "tool_calls", "trace", "session", "error", "body", "priority")
_BODY = FIELDS.index("body")
NUMBERS = {"status", "tokens_in", "tokens_out", "cached", "queue_ms", "ttft_ms", "total_ms", "tool_rounds",
           "server_tools", "tool_calls"}
SCAN_BATCH = 500
SCAN_MOST = 50_000  # records one read looks through for its matches (it says where to go on)


def body_key(request_id: str) -> str:
    return f"{PREFIX}:request-body:{request_id}"


def append(pipe: Pipeline, record: dict, body: dict | None = None, body_days: int = 0) -> None:
    """Queue the record (and its body) on `pipe`; trim() after a batch."""
    values = [_value(record.get(name)) for name in FIELDS]
    if body is not None:
        values[_BODY] = True
        pipe.set(body_key(record["request"]), json.dumps(body, ensure_ascii=False), ex=body_days * 86400)
    pipe.xadd(LOG, {"r": json.dumps(values, ensure_ascii=False, separators=(",", ":"))})


def trim(pipe: Pipeline, days: int, most: int) -> None:
    """Queue the log's trimming: by age exactly, by count approximately (whole nodes)."""
    pipe.xtrim(LOG, maxlen=most, approximate=True)
    pipe.xtrim(LOG, minid=int((time.time() - days * 86400) * 1000), approximate=False)


def _value(value):
    """What a record keeps of a value: times to a tenth of a millisecond,
    text as it is, nothing empty."""
    if isinstance(value, float):
        return round(value, 1)
    return value if value != "" else None


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
        batch = redis.xrevrange(LOG, max=high, min=low, count=SCAN_BATCH)
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
    if b"r" in fields:
        values = json.loads(fields[b"r"])
        record |= dict(zip(FIELDS, values + [None] * (len(FIELDS) - len(values))))
    else:  # (a field per name, values as text: the first release's records)
        for name in FIELDS:
            raw = fields.get(name.encode(), b"").decode()
            record[name] = (float(raw) if "." in raw else int(raw)) if name in NUMBERS and raw else raw or None
    record["body"] = record["body"] in (True, "1")
    return record


def body(redis: Redis, request_id: str) -> dict | None:
    raw = redis.get(body_key(request_id))
    return None if raw is None else json.loads(raw)

