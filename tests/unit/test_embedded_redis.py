"""`make run`'s own Redis keeps what it holds in its data directory across
a stop and a start, and one server at a time uses a directory."""
from __future__ import annotations

import pytest
import redis

from scripts.embedded_redis import DataDirInUse, EmbeddedRedis


def test_what_it_holds_outlives_a_stop_and_a_start(tmp_path):
    server = EmbeddedRedis(data_dir=tmp_path)
    redis.Redis.from_url(server.url).hset("switchboard:usage:2026-11-26", "alice", 42)
    server.stop()
    again = EmbeddedRedis(data_dir=tmp_path)
    try:
        assert redis.Redis.from_url(again.url).hget("switchboard:usage:2026-11-26", "alice") == b"42"
        assert redis.Redis.from_url(again.url).config_get("appendfsync")["appendfsync"] == "everysec"
    finally:
        again.stop()
    assert tmp_path.exists()  # the data directory is the operator's: never removed


def test_a_second_server_on_the_same_directory_is_refused(tmp_path):
    server = EmbeddedRedis(data_dir=tmp_path)
    try:
        with pytest.raises(DataDirInUse, match="make run"):
            EmbeddedRedis(data_dir=tmp_path)
        assert redis.Redis.from_url(server.url).ping()
    finally:
        server.stop()
    EmbeddedRedis(data_dir=tmp_path).stop()  # free again once it stopped


def test_without_a_directory_it_keeps_nothing():
    server = EmbeddedRedis()
    folder = server.dir
    assert redis.Redis.from_url(server.url).config_get("appendonly")["appendonly"] == "no"
    server.stop()
    assert not folder.exists()


def test_make_run_keeps_its_own_redis_in_the_data_directory(tmp_path, monkeypatch):
    """With no REDIS_URL and nothing on 6379, `make run` (scripts/run.py)
    starts its own Redis, persisting in SWITCHBOARD_DATA_DIR/redis."""
    from scripts import embedded_redis

    monkeypatch.delenv("REDIS_URL", raising=False)
    answers = embedded_redis.answers
    monkeypatch.setattr(embedded_redis, "answers",
                        lambda url, timeout=0.5: url != embedded_redis.DEFAULT_LOCAL and answers(url, timeout))
    url, server = embedded_redis.resolve_redis(tmp_path)
    try:
        assert url == server.url and server.dir == tmp_path / "redis"
        assert redis.Redis.from_url(url).config_get("appendonly")["appendonly"] == "yes"
    finally:
        server.stop()
