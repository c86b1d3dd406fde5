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
