"""The audit log: what changed who may do what, and which models are served:
keys added, revoked, replaced or their limits changed, budgets reset (by
the admin tool, which appends its entry itself), and the model registry's
models, each with who, what, when and from where. Kept in Redis
as a stream (newest last), trimmed by age (SWITCHBOARD_AUDIT_LOG_DAYS) and
count; the application only appends to it.

One writer per change: whoever sees a new state (the admin tool that wrote
the keys file, a web process that read it anew or started with the registry)
compares it with the last state recorded in Redis, and only the one that
swaps that record (a Lua compare-and-set) writes the entries. So a change is
logged once however many processes notice it, a change made while no web
process ran is logged by the first to start, and the admin tool logs its own
changes, with its author, before any web process can see them; a change
nobody logged that way was made by hand in the file.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import NamedTuple

from redis import Redis

from protocol.keys import AUDIT_LOG, audit_state_key
from protocol.scripts import ScriptBook

MOST = 100_000  # entries kept at most, whatever their age
_SCRIPTS = ScriptBook(Path(__file__).with_name("lua"))


class Author(NamedTuple):
    who: str  # the operator with a tool, or how a change came
    where: str  # the machine


def record_change(redis: Redis, subject: str, state: dict, author: Author, days: int,
                  before: dict | None = None) -> list[dict]:
    """If `state` differs from the last one recorded for `subject` (keys: name
    -> public settings; models: name -> backend), record the differences, once
    across processes; the entries written (none if another process did).
    With no state recorded (a Redis that lost it, or the log's first day),
    the caller's own `before` is compared with, else `state` is the baseline."""
    old = _SCRIPTS.run(redis, "swap_if_changed", [audit_state_key(subject)], [json.dumps(state, sort_keys=True)])
    previous = before if old is None else None if old == b"=" else json.loads(old)
    if previous is None:
        return []
    entries = differences(subject, previous, state, author)
    append(redis, entries, days)
    return entries


def differences(subject: str, old: dict, new: dict, author: Author) -> list[dict]:
    now, noun = time.time(), subject.rstrip("s")
    entries = [{"action": f"{noun} added", "target": name, "details": new[name]} for name in new if name not in old]
    entries += [{"action": f"{noun} removed", "target": name, "details": old[name]} for name in old if name not in new]
    entries += [{"action": f"{noun} changed", "target": name, "details": {
        field: [old[name].get(field), new[name].get(field)] for field in sorted(set(old[name]) | set(new[name]))
        if old[name].get(field) != new[name].get(field)}} for name in new if name in old and old[name] != new[name]]
    return [{"time": now, "who": author.who, "from": author.where, **entry} for entry in entries]


def append(redis: Redis, entries: list[dict], days: int) -> None:
    if not entries:
        return
    oldest = int((time.time() - days * 86400) * 1000)
    with redis.pipeline(transaction=False) as pipe:
        for entry in entries:
            pipe.xadd(AUDIT_LOG, {"entry": json.dumps(entry)}, maxlen=MOST, approximate=True)
        pipe.xtrim(AUDIT_LOG, minid=oldest, approximate=False)
        pipe.execute()


def latest(redis: Redis, count: int = 100) -> list[dict]:
    """The newest entries first."""
    return [json.loads(fields[b"entry"]) for _, fields in redis.xrevrange(AUDIT_LOG, count=count)]
