"""REDIS_URL read once for every process: one server, TLS, or the master
Redis Sentinel names (protocol/connection.py)."""
from __future__ import annotations

import ssl

import pytest
from redis.sentinel import SentinelManagedConnection, SentinelManagedSSLConnection

from protocol.connection import RedisTarget, RedisURLError, SentinelBlockingConnectionPool, database, redis_client
from protocol.keys import channels_prefix

SENTINELS = "sentinel://:secret@10.0.0.1:26379;sentinel://10.0.0.2;sentinel://10.0.0.3:26380/3"


@pytest.mark.parametrize("url, db", [
    ("redis://127.0.0.1:6379/0", 0), ("redis://h:1/7", 7), ("rediss://:pw@h:6380/2?ssl_cert_reqs=none", 2),
    ("unix:///run/redis.sock?db=4", 4), (SENTINELS, 3), ("sentinel://a:1/5;sentinel://b:2", 5),
    ("sentinel://a:1", 0), ("nonsense", 0),
], ids=["plain", "db", "tls", "unix", "sentinel", "db-on-first", "sentinel-no-db", "bad"])
def test_the_database_a_url_names(url, db):
    assert database(url) == db
    assert channels_prefix(url) == f"switchboard:db{db}"


def test_sentinel_urls_name_every_sentinel_and_the_master():
    target = RedisTarget(SENTINELS, master="office", sentinel_password="sentinels-own")
    assert target.is_sentinel and target.sentinels == [("10.0.0.1", 26379), ("10.0.0.2", 26379), ("10.0.0.3", 26380)]
    assert target.options == {"password": "secret", "db": 3}
    assert target.tls == {}
    # kombu reads the first URL's credentials and database only
    assert target.celery_url() == "sentinel://:secret@10.0.0.1:26379/3;sentinel://10.0.0.2:26379;sentinel://10.0.0.3:26380"
    assert "secret" not in repr(target) and "sentinels-own" not in repr(target)


@pytest.mark.parametrize("url, reqs, ca", [
    ("rediss://h:6380/0?ssl_cert_reqs=none", ssl.CERT_NONE, None),
    ("rediss://h:6380/0?ssl_ca_certs=/etc/ca.pem", ssl.CERT_REQUIRED, "/etc/ca.pem"),
    ("rediss://h:6380/0", ssl.CERT_REQUIRED, None),
    ("sentinel://h:26379/0?ssl_cert_reqs=required&ssl_ca_certs=/ca.pem", ssl.CERT_REQUIRED, "/ca.pem"),
    ("sentinel://h:26379/0?ssl=true", ssl.CERT_REQUIRED, None),
], ids=["self-signed", "own-ca", "system-cas", "sentinel-tls", "sentinel-ssl-flag"])
def test_tls_options(url, reqs, ca):
    tls = RedisTarget(url).tls
    assert tls["ssl_cert_reqs"] == reqs and tls.get("ssl_ca_certs") == ca


def test_plain_urls_have_no_tls():
    assert RedisTarget("redis://h:1/0").tls == {} and RedisTarget("sentinel://h:1/0").tls == {}


def test_a_bad_sentinel_url_is_refused_by_name():
    with pytest.raises(RedisURLError, match="sentinel://host:port"):
        RedisTarget("sentinel://a:1;redis://b:2").sentinels
    with pytest.raises(RedisURLError, match="ssl_cert_reqs is none, optional or required"):
        RedisTarget("rediss://h:1/0?ssl_cert_reqs=sometimes").tls


def test_a_sentinel_client_follows_the_master_over_a_bounded_pool():
    client = redis_client(RedisTarget(SENTINELS + "?ssl_cert_reqs=none", "office", "pw"), "test", 5)
    pool = client.connection_pool
    assert isinstance(pool, SentinelBlockingConnectionPool) and pool.max_connections == 5
    assert pool.service_name == "office" and pool.connection_class is SentinelManagedSSLConnection
    assert pool.connection_kwargs["password"] == "secret" and pool.connection_kwargs["db"] == 3
    sentinel = pool.sentinel_manager.sentinels[0].connection_pool.connection_kwargs
    assert sentinel["password"] == "pw" and sentinel["ssl_cert_reqs"] == ssl.CERT_NONE
    plain = redis_client(RedisTarget(SENTINELS), "test", 5).connection_pool
    assert plain.connection_class is SentinelManagedConnection


def test_the_settings_build_the_target(monkeypatch):
    from settings import load_settings

    monkeypatch.setenv("REDIS_URL", SENTINELS)
    monkeypatch.setenv("SWITCHBOARD_REDIS_MASTER", "office")
    monkeypatch.setenv("SWITCHBOARD_REDIS_SENTINEL_PASSWORD", "pw")
    settings = load_settings()
    assert RedisTarget.of(settings) == RedisTarget(SENTINELS, "office", "pw")
    assert "pw" not in repr(settings)
