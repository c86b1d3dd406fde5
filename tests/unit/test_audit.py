"""The audit log (ledger/audit.py) on a real Redis: a change is written
once however many processes see it, by whoever recorded the state before;
the first state is the baseline; the author a tool noted is named; old
entries go."""
from __future__ import annotations

import json
import time

from ledger import audit
from protocol import keys

ALICE = {"key": "ab12cd34", "models": ["*"], "daily_tokens": None, "admin": False}
WEB_1, WEB_2 = audit.Author("by hand", "web-1"), audit.Author("by hand", "web-2")


def test_a_change_is_written_once_by_whoever_swaps_the_state(clean_redis):
    assert audit.record_change(clean_redis, "keys", {"alice": ALICE}, WEB_1, 400) == []  # baseline
    new = {"alice": ALICE | {"daily_tokens": 1000}, "bob": ALICE | {"key": "ee77ff00"}}
    written = audit.record_change(clean_redis, "keys", new, audit.Author("ops with scripts/admin.py", "laptop"), 400)
    assert audit.record_change(clean_redis, "keys", new, WEB_2, 400) == []  # the other process: nothing
    assert [(e["action"], e["target"], e["who"], e["from"]) for e in written] == [
        ("key added", "bob", "ops with scripts/admin.py", "laptop"),
        ("key changed", "alice", "ops with scripts/admin.py", "laptop")]
    assert written[1]["details"] == {"daily_tokens": [None, 1000]}
    gone = audit.record_change(clean_redis, "keys", {"bob": new["bob"]}, WEB_2, 400)
    assert [(e["action"], e["target"], e["who"], e["from"]) for e in gone] == [
        ("key removed", "alice", "by hand", "web-2")]
    assert [e["target"] for e in audit.latest(clean_redis)] == ["alice", "alice", "bob"]  # newest first


def test_entries_older_than_the_retention_go(clean_redis):
    old_ms = int((time.time() - 3 * 86400) * 1000)
    clean_redis.xadd(keys.AUDIT_LOG, {"entry": json.dumps({"action": "key added", "target": "ancient"})},
                     id=f"{old_ms}-0")
    audit.append(clean_redis, [{"time": time.time(), "action": "key added", "target": "new"}], days=2)
    assert [e["target"] for e in audit.latest(clean_redis)] == ["new"]


def test_with_no_state_recorded_the_callers_own_before_is_compared_with(clean_redis):
    """Redis lost the recorded state (or the log is new): a web process still
    logs the change it just read, from the keys it had."""
    written = audit.record_change(clean_redis, "keys", {}, WEB_1, 400, before={"alice": ALICE})
    assert [(e["action"], e["target"]) for e in written] == [("key removed", "alice")]
