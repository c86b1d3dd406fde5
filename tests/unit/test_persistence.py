"""Whether a Redis persists, asked of real redis-server processes set up
each way: an append-only file, RDB snapshots, nothing, CONFIG refused
(as some hosted Redis do) and unreachable."""
from __future__ import annotations

import logging

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from app.persistence_check import PersistenceCheck
from ledger.persistence import FIX, persistence
from scripts.embedded_redis import EmbeddedRedis, free_port

NO_CONFIG = ("--rename-command", "CONFIG", "")


@pytest.fixture
def server(request, tmp_path):
    data_dir, args, *snapshots = request.param
    started = EmbeddedRedis(data_dir=tmp_path / "data" if data_dir else None, args=args)
    client = redis.Redis.from_url(started.url)
    if snapshots:
        client.config_set("save", snapshots[0])
    yield client
    started.stop()


@pytest.mark.parametrize("server, mode", [
    ((True, ()), "aof"),
    ((False, ()), "none"),
    ((False, (), "900 1"), "rdb"),
    ((True, (), "900 1"), "aof+rdb"),
    ((True, NO_CONFIG), "aof"),  # CONFIG refused, INFO still says so
    ((False, NO_CONFIG), "unknown"),
], indirect=["server"], ids=["aof", "nothing", "rdb", "both", "aof-no-config", "no-config"])
def test_how_a_redis_persists(server, mode):
    assert persistence(server).mode == mode


def test_an_unreachable_redis_is_unknown_not_a_failure():
    nobody = redis.Redis(port=free_port(), socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0))
    found = persistence(nobody)
    assert found.mode == "unknown" and "unreachable" in found.detail


@pytest.mark.parametrize("server", [(False, ())], indirect=True, ids=["nothing"])
def test_a_forgetting_redis_is_said_once_with_its_fix(server, caplog):
    check = PersistenceCheck(every=0)  # asked again at every look
    with caplog.at_level(logging.WARNING, logger="switchboard.redis"):
        reports = [check.current(server).report() for _ in range(3)]
    assert reports[0]["persistence"] == "none" and FIX in reports[0]["warning"]
    warnings = [r for r in caplog.records if "persists nothing" in r.getMessage()]
    assert len(warnings) == 1 and FIX in warnings[0].getMessage()


@pytest.mark.parametrize("server", [(True, ())], indirect=True, ids=["aof"])
def test_a_persisting_redis_has_no_warning(server):
    assert PersistenceCheck().current(server).report() == {"persistence": "aof"}
