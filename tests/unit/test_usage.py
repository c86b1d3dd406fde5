"""Usage by day and person, the console's series and errors, and the admin
tool's edits of the keys file."""
from __future__ import annotations

import argparse
from datetime import datetime, timezone

import pytest

from identity.keys import digest, read_keys_file
from ledger import counting, usage
from protocol import keys
from protocol.events import Usage
from scripts.admin import add_key, list_keys, revoke_key, usage_text


def test_requests_are_counted_per_person_and_model(clean_redis):
    counting.record_request(clean_redis, "r1", "alice", "echo", "ok", Usage(prompt_tokens=3, completion_tokens=5))
    counting.record_request(clean_redis, "r2", "alice", "echo", "abort")
    counting.record_request(clean_redis, "r3", "alice", "smol", "error", Usage(prompt_tokens=2, completion_tokens=0))
    report = usage.usage(clean_redis)
    assert report["alice"]["echo"] == {"requests": 2, "prompt_tokens": 3, "completion_tokens": 5, "errors": 0,
                                       "aborts": 1}
    assert usage.totals_by_person(report)["alice"]["errors"] == 1 and usage.tokens_today(clean_redis, "alice") == 10
    lines = usage_text(usage.today(), report).splitlines()
    assert lines[1].split() == ["PERSON", "MODEL", "REQUESTS", "PROMPT", "COMPLETION", "ERRORS", "ABORTS"]
    assert [line.split() for line in lines[2:]] == [["alice", "echo", "2", "3", "5", "0", "1"],
                                                    ["alice", "smol", "1", "2", "0", "1", "0"]]


def test_a_request_is_counted_once_whoever_sends_it_first(clean_redis):
    """Its worker's count and its web process's, racing (the client left as it finished)."""
    pipe = clean_redis.pipeline(transaction=False)  # the worker's final write
    counting.record_request(pipe, "r1", "alice", "echo", "ok", Usage(prompt_tokens=3, completion_tokens=5))
    pipe.execute()
    counting.record_request(clean_redis, "r1", "alice", "echo", "abort")
    assert usage.usage(clean_redis)["alice"]["echo"] == {"requests": 1, "prompt_tokens": 3, "completion_tokens": 5,
                                                         "errors": 0, "aborts": 0}
    assert usage.tokens_today(clean_redis, "alice") == 8
    assert 0 < clean_redis.ttl(usage.usage_key(usage.today())) <= usage.KEEP_DAYS * 86400


def test_a_count_queued_on_a_pipeline_needs_no_script_loaded_before(clean_redis):
    clean_redis.script_flush()  # Redis restarted
    with clean_redis.pipeline(transaction=False) as pipe:
        counting.record_request(pipe, "r2", "bob", "echo", "ok", Usage(prompt_tokens=1, completion_tokens=1))
        assert pipe.execute() == [1]


def test_midnight_and_the_day():
    moment = datetime(2026, 11, 23, 23, 59, 0, tzinfo=timezone.utc).timestamp()
    assert usage.seconds_to_midnight(moment) == 61 and usage.today(moment) == "2026-11-23"


def test_series_and_errors(clean_redis):
    counting.record_minute(clean_redis, 0.2, 10, 0.5, 0.05)
    counting.record_minute(clean_redis, 0.4, 10, 0.5, 0.15)
    last = usage.series(clean_redis)[-1]
    assert last["ttft"] == pytest.approx(0.3) and last["tokens_per_second"] == pytest.approx(20)
    assert last["queue_wait"] == pytest.approx(0.1) and last["jobs"] == 2
    for n in range(usage.ERRORS_KEPT + 5):
        counting.record_error(clean_redis, "bob", "echo", f"boom {n}")
    errors = usage.last_errors(clean_redis)
    assert len(errors) == usage.ERRORS_KEPT and errors[0]["message"] == f"boom {usage.ERRORS_KEPT + 4}"


def options(**given) -> argparse.Namespace:
    fields = dict.fromkeys(("models", "max_concurrent", "requests_per_minute", "weight", "daily_tokens",
                            "mcp_servers"), None) | {"admin": False}
    return argparse.Namespace(**(fields | given))


def test_the_admin_tool_edits_the_keys_file_keeping_comments(tmp_path):
    path = tmp_path / "keys.toml"
    path.write_text('# our office\n[keys.bob]\nsha256 = "00"  # bob\'s laptop\n')
    key = add_key(path, "alice", options(models=["echo*"], daily_tokens=1000, admin=True))
    text = path.read_text()
    assert "# our office" in text and "# bob's laptop" in text and key not in text and digest(key) in text
    alice = next(k for k in read_keys_file(path) if k.name == "alice")
    assert (alice.models, alice.daily_tokens, alice.admin) == (("echo*",), 1000, True)
    with pytest.raises(SystemExit, match='a key named "alice" is already'):
        add_key(path, "alice", options())
    with pytest.raises(SystemExit, match="not written: keys file: keys.carol.daily_tokens must be a whole number"):
        add_key(path, "carol", options(daily_tokens=0))
    assert "carol" not in path.read_text()
    revoke_key(path, "alice")
    assert [k["name"] for k in list_keys(path)] == ["bob"] and "# bob's laptop" in path.read_text()


def test_an_answer_is_counted_only_if_a_web_process_heard_it(clean_redis):
    """A finished job's final event and its count (lua/deliver_final.lua):
    nobody hears a channel whose web process lost Redis, and that client was
    told of an error, so nothing is counted; once heard, counted once."""
    import uuid

    from protocol.contract import Job
    from protocol.events import DoneEvent, decode_event

    # a channel of its own: the suite's event taps listen to every reply channel of this database
    channel = f"test-answer:{uuid.uuid4().hex}"
    job = Job(id="r9", model="echo", usage_of="alice", reply_channel=channel)
    done = DoneEvent(reason="stop", usage=Usage(prompt_tokens=3, completion_tokens=5))

    def deliver() -> int:
        pipe = clean_redis.pipeline(transaction=False)
        counting.deliver_answer(pipe, job, done)
        return pipe.execute()[0]
    assert deliver() == 0 and usage.usage(clean_redis) == {}
    pubsub = clean_redis.pubsub()
    pubsub.subscribe(channel)
    pubsub.get_message(timeout=1)
    assert deliver() == 1 and deliver() == 1  # heard twice, counted once
    assert decode_event(pubsub.get_message(timeout=1)["data"]) == done
    assert usage.usage(clean_redis)["alice"]["echo"]["completion_tokens"] == 5
    assert usage.tokens_today(clean_redis, "alice") == 8
    pubsub.close()


def test_an_error_its_client_was_told_counts_in_place_of_an_answer_that_never_reached_it(clean_redis):
    """Redis counted the final event's PUBLISH as heard, then stopped before
    delivering it: the web process told its client of an error, and that is
    what counts (lua/count_told_error.lua); sent again (a retried end), once."""
    pipe = clean_redis.pipeline(transaction=False)  # the worker's final write, heard
    counting.record_request(pipe, "r1", "alice", "echo", "ok", Usage(prompt_tokens=3, completion_tokens=5))
    pipe.execute()
    counting.record_request(pipe, "r2", "alice", "echo", "ok", Usage(prompt_tokens=1, completion_tokens=1))
    pipe.execute()
    for _ in range(2):
        counting.record_request(clean_redis, "r1", "alice", "echo", "error")
    assert usage.usage(clean_redis)["alice"]["echo"] == {"requests": 2, "prompt_tokens": 1, "completion_tokens": 1,
                                                         "errors": 1, "aborts": 0}
    assert usage.tokens_today(clean_redis, "alice") == 2  # the daily budget is given back too
    counting.record_request(pipe, "r1", "alice", "echo", "ok", Usage(prompt_tokens=3, completion_tokens=5))
    pipe.execute()  # a worker's answer after the error its client was told: counted already
    counting.record_request(clean_redis, "r2", "alice", "echo", "abort")  # a client that left: the answer stands
    assert usage.usage(clean_redis)["alice"]["echo"] == {"requests": 2, "prompt_tokens": 1, "completion_tokens": 1,
                                                         "errors": 1, "aborts": 0}


def _day(days_ago: int) -> str:
    return usage._days_ago(days_ago)


def _count(redis, day: str, person: str, model: str, **metrics) -> None:
    for metric, value in metrics.items():
        redis.hincrby(usage.usage_key(day), usage.SEPARATOR.join((person, model, metric)), value)
    redis.expire(usage.usage_key(day), usage.KEEP_DAYS * 86400)


def test_a_past_day_is_folded_by_the_maintenance_step_and_reads_the_same(quiet_redis):
    old, older, recent = _day(10), _day(300), _day(1)
    for n in range(150):  # enough people that the day's hash is a hashtable, as an office's is
        _count(quiet_redis, old, f"person{n}", "echo", requests=3, prompt_tokens=40 + n, completion_tokens=7)
        _count(quiet_redis, recent, f"person{n}", "echo", requests=1)
    _count(quiet_redis, older, "alice", "echo", requests=1)
    hash_bytes = quiet_redis.memory_usage(usage.usage_key(old))
    first = usage.usage(quiet_redis, old)
    assert first["person7"]["echo"] == {"requests": 3, "prompt_tokens": 47, "completion_tokens": 7, "errors": 0,
                                        "aborts": 0}
    assert quiet_redis.exists(usage.usage_key(old))  # a read writes nothing (the console reads every 2 s)
    assert usage.fold_old_days(quiet_redis) == [old, older]
    assert not quiet_redis.exists(usage.usage_key(old)) and usage.usage(quiet_redis, old) == first
    folded = usage.usage_folded_key(old)
    assert quiet_redis.memory_usage(folded) * 5 < hash_bytes  # compact: a fifth of the hash, or less
    assert usage.KEEP_DAYS * 86400 - 60 < quiet_redis.ttl(folded) <= usage.KEEP_DAYS * 86400
    # yesterday: a late count may still come, so it stays a hash
    assert quiet_redis.exists(usage.usage_key(recent)) and not quiet_redis.exists(usage.usage_folded_key(recent))


def test_the_maintenance_step_runs_once_an_hour_in_the_cluster(quiet_redis):
    """Every worker's heartbeat offers; the one that takes the lock folds."""
    old = _day(5)
    _count(quiet_redis, old, "alice", "echo", requests=1)
    assert usage.fold_old_days(quiet_redis) == [old]
    _count(quiet_redis, _day(6), "bob", "echo", requests=1)
    assert usage.fold_old_days(quiet_redis) == []  # another process, within the hour: the lock is held
    ttl = quiet_redis.ttl(keys.maintenance_lock_key("usage-fold"))
    assert usage.FOLD_EVERY_SECONDS - 60 < ttl <= usage.FOLD_EVERY_SECONDS
    quiet_redis.delete(keys.maintenance_lock_key("usage-fold"))  # the hour is over
    assert usage.fold_old_days(quiet_redis) == [_day(6)]


def test_a_workers_heartbeat_offers_the_maintenance_step(quiet_redis):
    from workers.heartbeat import Heartbeat

    _count(quiet_redis, _day(3), "alice", "echo", requests=1)
    Heartbeat(quiet_redis, "w1").beat_once()
    assert quiet_redis.exists(usage.usage_folded_key(_day(3))) and not quiet_redis.exists(usage.usage_key(_day(3)))


def test_rows_over_a_range_with_the_estimated_cost_and_as_csv(quiet_redis):
    first, second = _day(3), _day(2)
    _count(quiet_redis, first, "alice", "paid", requests=2, prompt_tokens=1_000_000, completion_tokens=500_000)
    _count(quiet_redis, second, "bob", "echo", requests=1, prompt_tokens=5, completion_tokens=2, errors=1)
    rows = usage.rows(quiet_redis, first, second, {"paid": (0.5, 2.0)})
    assert rows == [
        {"day": first, "person": "alice", "model": "paid", "requests": 2, "prompt_tokens": 1_000_000,
         "completion_tokens": 500_000, "errors": 0, "aborts": 0, "cost": 1.5},
        {"day": second, "person": "bob", "model": "echo", "requests": 1, "prompt_tokens": 5, "completion_tokens": 2,
         "errors": 1, "aborts": 0, "cost": None}]
    assert usage.as_csv(rows) == (
        "day,person,model,requests,prompt_tokens,completion_tokens,errors,aborts,cost\r\n"
        f"{first},alice,paid,2,1000000,500000,0,0,1.5\r\n{second},bob,echo,1,5,2,1,0,\r\n")
    assert usage.rows(quiet_redis, _day(1), _day(0)) == []


@pytest.mark.parametrize("first, last", [("2026-11-31", "2026-12-01"), ("2026-12-02", "2026-12-01"),
                                         ("yesterday", "2026-12-01")], ids=["no-such-day", "backwards", "words"])
def test_a_bad_range_is_a_value_error_naming_it(first, last):
    with pytest.raises(ValueError):
        usage.days_between(first, last)
    assert usage.days_between("2026-11-30", "2026-12-01") == ["2026-11-30", "2026-12-01"]


def test_the_size_measurement_runs_on_a_redis_of_its_own(capsys):
    from scripts.usage_size import main

    main(["--people", "3", "--models", "2", "--days", "4"])
    assert "3 people x 2 models, 5 counters each: a day is " in capsys.readouterr().out
