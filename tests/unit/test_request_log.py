"""The request log (ledger/request_log.py) on a real Redis: records read
back newest first through each filter and page by page, old records go by
age and by count, bodies live apart under their own expiry; and the
client's session id as Claude Code and Codex send it (app/exchange.py)."""
from __future__ import annotations

import json
import time
from pathlib import Path

from app.exchange import _user_id
from dialects.hints import client_session
from ledger import request_log
from protocol import keys

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"  # (copies of ../shared/fixtures)


def _append(redis, days: int = 14, most: int = 1000, body: dict | None = None, **record) -> None:
    with redis.pipeline(transaction=False) as pipe:
        request_log.append(pipe, {"request": "r", "status": 200, **record}, body, 3)
        request_log.trim(pipe, days, most)
        pipe.execute()


def test_records_come_back_newest_first_through_each_filter(clean_redis):
    rows = [("alice", "echo", "echo", 200, "stop"), ("bob", "smollm2", "echo", 200, "stop"),
            ("alice", "smollm2", "smollm2", 429, None), ("bob", "echo", "echo", 200, "error")]
    for number, (person, model, answered, status, finish) in enumerate(rows):
        _append(clean_redis, request=f"r{number}", person=person, model=model, answered=answered, status=status,
                finish=finish, tokens_in=10 + number, ttft_ms=12.345)
    read = lambda **where: [r["request"] for r in request_log.read(clean_redis, request_log.Filter(**where))[0]]  # noqa
    assert read() == ["r3", "r2", "r1", "r0"]
    assert read(person="alice") == ["r2", "r0"]
    assert read(model="echo") == ["r3", "r1", "r0"]  # asked for, or answered
    assert read(status="4xx") == ["r2"] and read(status="429") == ["r2"] and read(status="error") == ["r3", "r2"]
    newest = request_log.read(clean_redis, request_log.Filter())[0][0]
    assert newest["tokens_in"] == 13 and newest["ttft_ms"] == 12.3 and newest["status"] == 200
    assert newest["cached"] is None and newest["body"] is False and abs(newest["time"] - time.time()) < 60


def test_every_text_a_client_names_is_cut_to_its_bound(clean_redis):
    long = "x" * 10_000
    _append(clean_redis, person="alice", model=long, route="/" + long, session=long, error=long, answered="echo")
    [(_, fields)] = clean_redis.xrange(keys.REQUEST_LOG)
    assert len(fields[b"r"]) < 1024  # whole: 40 KB
    [record], _ = request_log.read(clean_redis, request_log.Filter())
    for name, most in (("model", request_log.TEXT_MOST), ("route", request_log.TEXT_MOST),
                       ("session", request_log.TEXT_MOST), ("error", request_log.ERROR_MOST)):
        assert len(record[name]) == most and record[name].endswith("…"), name
    assert record["answered"] == "echo" and record["person"] == "alice"  # short texts are kept whole
    assert request_log.cut("x" * 200, 200) == "x" * 200 and request_log.cut("x" * 201, 200) == "x" * 199 + "…"


def test_a_time_range_and_pages(clean_redis):
    now_ms = int(time.time() * 1000)
    for number in range(5):  # a minute apart, the newest now
        clean_redis.xadd(keys.REQUEST_LOG, {"r": json.dumps([f"r{number}"])}, id=f"{now_ms - (4 - number) * 60_000}-0")
    found, _ = request_log.read(clean_redis, request_log.Filter(since_ms=now_ms - 150_000, until_ms=now_ms - 30_000))
    assert [r["request"] for r in found] == ["r3", "r2"]
    first, after = request_log.read(clean_redis, request_log.Filter(), count=2)
    second, last = request_log.read(clean_redis, request_log.Filter(), count=2, before=after)
    assert [r["request"] for r in first + second] == ["r4", "r3", "r2", "r1"] and last is not None
    assert request_log.read(clean_redis, request_log.Filter(), count=2, before=last) == (
        [request_log.decode(*clean_redis.xrange(keys.REQUEST_LOG, count=1)[0])], None)


def test_old_records_go_by_age_and_by_count(clean_redis):
    old_ms = int((time.time() - 3 * 86400) * 1000)
    clean_redis.xadd(keys.REQUEST_LOG, {"request": "ancient"}, id=f"{old_ms}-0")
    _append(clean_redis, days=2, request="new")
    assert [r["request"] for r in request_log.read(clean_redis, request_log.Filter())[0]] == ["new"]
    for number in range(600):
        _append(clean_redis, most=100, request=f"r{number}")
    kept = clean_redis.xlen(keys.REQUEST_LOG)
    assert 100 <= kept <= 250  # trimmed by whole nodes (approximately), never below the count
    assert request_log.read(clean_redis, request_log.Filter(), count=1)[0][0]["request"] == "r599"


def test_a_body_is_kept_apart_for_its_own_days(clean_redis):
    _append(clean_redis, request="with-body", body={"person": "alice", "request": {"model": "echo"}, "reply": "hi"})
    record = request_log.read(clean_redis, request_log.Filter())[0][0]
    assert record["body"] is True and request_log.body(clean_redis, "with-body")["reply"] == "hi"
    assert 3 * 86400 - 60 < clean_redis.ttl(keys.request_body_key("with-body")) <= 3 * 86400
    assert request_log.body(clean_redis, "no-such-request") is None


def test_the_session_the_record_keeps_as_claude_code_and_codex_send_it():
    """The record keeps the session the client names (app/exchange.py), read
    as the dialects read it (dialects/hints.py), refused requests' too."""
    claude = json.loads((FIXTURES / "claude-code-messages-request.json").read_text())
    codex = json.loads((FIXTURES / "codex-responses-request.json").read_text())
    said = lambda sent: client_session(sent["headers"], _user_id(sent["body"]))  # noqa: E731
    assert said(claude) == claude["headers"]["X-Claude-Code-Session-Id"]
    assert said(codex) == codex["headers"]["session-id"]
    in_metadata = {"metadata": {"user_id": json.dumps({"device_id": "d", "session_id": "s-123"})}}
    assert client_session({}, _user_id(in_metadata)) == "s-123"
    assert client_session({}, _user_id({"metadata": {"user_id": "{not json"}})) is None
    assert client_session({}, _user_id({"model": "echo"})) is None and client_session({}, _user_id(None)) is None


def test_a_web_process_writes_its_records_together(clean_redis):
    """app/record_buffer.py: a record handed over is written by a greenlet
    of its own (never by the request), with whatever gathered meanwhile."""
    from types import SimpleNamespace

    from app.record_buffer import RecordBuffer

    settings = SimpleNamespace(request_log_days=14, request_log_max=1000, request_log_body_days=3)
    buffer = RecordBuffer(clean_redis, settings)
    for number in range(3):
        buffer.add({"request": f"r{number}", "status": 200}, None)
    assert clean_redis.xlen(keys.REQUEST_LOG) == 0  # handed over: nothing written on the caller's way
    buffer.drain()
    assert [r["request"] for r in request_log.read(clean_redis, request_log.Filter())[0]] == ["r2", "r1", "r0"]
    assert buffer.flush() == 0


def test_a_record_is_one_field_and_a_shorter_one_reads_null_for_the_rest(clean_redis):
    """A record is one JSON array (a field per name cost the web process three times the packing); a record
    shorter than FIELDS (written before a field was added at the end) reads the missing ones as null."""
    _append(clean_redis, request="new", person="alice", error='a "quoted" error, naïve', total_ms=1.25)
    clean_redis.xadd(keys.REQUEST_LOG, {"r": json.dumps(["shorter", "carol"])})
    entries = clean_redis.xrange(keys.REQUEST_LOG)
    assert list(entries[0][1]) == [b"r"]
    shorter, new = request_log.read(clean_redis, request_log.Filter())[0]
    assert (new["person"], new["error"], new["total_ms"], new["status"], new["body"]) == (
        "alice", 'a "quoted" error, naïve', 1.2, 200, False)  # (1.25 rounds to even)
    assert shorter["person"] == "carol" and shorter["session"] is None and shorter["body"] is False
    assert set(new) == set(shorter)
