"""How every process reaches Redis, from REDIS_URL: the one place that reads
it (the web process, the workers, Celery's broker settings, the admin tool).

REDIS_URL takes:
- `redis://[user:password@]host:port/db` and `unix:///path/redis.sock?db=N`;
- `rediss://...`, TLS: the server's certificate is checked against the
  system's CAs, or `?ssl_ca_certs=/path/ca.pem`; `?ssl_cert_reqs=none` accepts
  a self-signed one (what Heroku-style hosts hand out);
- `sentinel://host:port[;sentinel://host:port...][/db]`, Celery's form: the
  master that Redis Sentinel names `master` (SWITCHBOARD_REDIS_MASTER), asked
  of the sentinels before each new connection, so every pool, pub/sub
  subscription and Lua script follows a failover. A password in the URL is
  the master's; the sentinels' is SWITCHBOARD_REDIS_SENTINEL_PASSWORD. `ssl_*`
  parameters (or `ssl=true`) use TLS to the sentinels and the master alike.
The database, credentials and parameters may be written on any one of the
sentinel URLs.
"""
from __future__ import annotations

import re
import ssl
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlencode, urlsplit

from redis import BlockingConnectionPool, Redis
from redis import asyncio as aioredis
from redis.asyncio import sentinel as aiosentinel
from redis.connection import parse_url
from redis.sentinel import Sentinel, SentinelConnectionPool, SentinelManagedConnection, SentinelManagedSSLConnection

SENTINEL_SCHEME = "sentinel://"
_PASSWORD = re.compile(r"(://[^:@/;]*:)[^@/;]*@")
_TLS_OPTIONS = ("ssl_cert_reqs", "ssl_ca_certs", "ssl_certfile", "ssl_keyfile", "ssl_check_hostname")
_CERT_REQS = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


class RedisURLError(ValueError):
    """REDIS_URL cannot be used; the message says why (never its password)."""


@dataclass(frozen=True)
class RedisTarget:
    """Where Redis is: one server's URL, or the sentinels that name the master."""
    url: str = field(repr=False)
    master: str = "mymaster"
    sentinel_password: str | None = field(default=None, repr=False)

    def __repr__(self) -> str:  # never a password, wherever it is logged
        return f"RedisTarget({redacted(self.url)!r}, master={self.master!r})"

    @classmethod
    def of(cls, settings) -> RedisTarget:
        """From the settings model (settings/): REDIS_URL and the Sentinel settings."""
        password = settings.redis_sentinel_password
        return cls(settings.redis_url, settings.redis_master,
                   password.get_secret_value() if password is not None else None)

    @property
    def is_sentinel(self) -> bool:
        return self.url.startswith(SENTINEL_SCHEME)

    @property
    def sentinels(self) -> list[tuple[str, int]]:
        return [(part.hostname or "127.0.0.1", part.port or 26379) for part in self._parts()]

    @property
    def options(self) -> dict:
        """redis-py's keyword arguments for the (master) server: host and
        port (a single server's), db, credentials, TLS and URL parameters."""
        if not self.is_sentinel:
            return parse_url(self.url)
        options = parse_url("redis://" + self._merged().split("://", 1)[1])
        options.pop("host", None), options.pop("port", None)
        return options

    @property
    def db(self) -> int:
        return int(self.options.get("db", 0))

    @property
    def tls(self) -> dict:
        """The TLS options (empty without TLS), as redis-py and kombu take them."""
        options = self.options
        if not (self.url.startswith("rediss://") or _wants_tls(options)):
            return {}
        found = {name: options[name] for name in _TLS_OPTIONS if name in options}
        found["ssl_cert_reqs"] = _cert_reqs(str(found.get("ssl_cert_reqs", "required")))
        return found

    def celery_url(self) -> str:
        """The broker URL as kombu reads it: for Sentinel, the database,
        credentials and parameters on the first sentinel's URL (kombu reads
        only that one's)."""
        if not self.is_sentinel:
            return self.url
        first = self._merged(without=("ssl",))  # kombu takes TLS from broker_use_ssl (queue_config)
        rest = [f"sentinel://{host}:{port}" for host, port in self.sentinels[1:]]
        return ";".join([first, *rest])

    def _parts(self):
        parts = [urlsplit(part.strip()) for part in self.url.split(";") if part.strip()]
        if not parts or any(part.scheme != "sentinel" for part in parts):
            raise RedisURLError("REDIS_URL: a Sentinel URL is sentinel://host:port[;sentinel://host:port...][/db]")
        return parts

    def _merged(self, without: tuple[str, ...] = ()) -> str:
        """One sentinel URL with the first host and whatever credentials,
        database and parameters any of the parts carries."""
        parts = self._parts()
        auth = next((part.netloc.rsplit("@", 1)[0] + "@" for part in parts if "@" in part.netloc), "")
        path = next((part.path for part in parts if part.path.strip("/")), "")
        query = [pair for part in parts for pair in parse_qsl(part.query) if pair[0] not in without]
        host, port = self.sentinels[0]
        return f"sentinel://{auth}{host}:{port}{path}" + (f"?{urlencode(query)}" if query else "")


def redacted(url: str) -> str:
    """The URL with any password in it replaced by ***."""
    return _PASSWORD.sub(r"\1***@", url)


def _wants_tls(options: dict) -> bool:
    return any(name in options for name in _TLS_OPTIONS) or str(options.get("ssl", "")).lower() in ("true", "1")


def _cert_reqs(value: str) -> ssl.VerifyMode:
    try:
        return _CERT_REQS[value.lower().removeprefix("cert_")]
    except KeyError:
        raise RedisURLError(f"REDIS_URL: ssl_cert_reqs is none, optional or required, not {value!r}") from None


class SentinelBlockingConnectionPool(SentinelConnectionPool, BlockingConnectionPool):
    """redis-py's Sentinel pool (each new connection asks the sentinels for
    the master; a master that became a replica drops its connections), with
    the blocking pool's bound: callers wait for a free connection."""


class AsyncSentinelBlockingConnectionPool(aiosentinel.SentinelConnectionPool, aioredis.BlockingConnectionPool):
    """The same, for asyncio."""


@dataclass(frozen=True)
class _Flavour:
    """redis-py's classes for threads and greenlets, or for asyncio."""
    client: type
    pool: type
    sentinel: type
    sentinel_pool: type
    connections: tuple[type, type]  # plain, TLS (Sentinel-managed)


_BLOCKING = _Flavour(Redis, BlockingConnectionPool, Sentinel, SentinelBlockingConnectionPool,
                     (SentinelManagedConnection, SentinelManagedSSLConnection))
_ASYNCIO = _Flavour(aioredis.Redis, aioredis.BlockingConnectionPool, aiosentinel.Sentinel,
                    AsyncSentinelBlockingConnectionPool,
                    (aiosentinel.SentinelManagedConnection, aiosentinel.SentinelManagedSSLConnection))


def redis_client(target: RedisTarget | str, name: str, max_connections: int = 32, **connection_options) -> Redis:
    """A client over a bounded pool: when all its connections are busy, a
    caller waits for one (up to 10 s) instead of opening more. `name` shows
    in Redis's CLIENT LIST, so an operator sees who holds which connection."""
    return _client(_BLOCKING, target, name, max_connections, connection_options)


def async_redis_client(target: RedisTarget | str, name: str, max_connections: int = 32,
                       **connection_options) -> aioredis.Redis:
    """The same, for a process that runs on an asyncio loop (the MCP pool)."""
    return _client(_ASYNCIO, target, name, max_connections, connection_options)


def _client(flavour: _Flavour, target: RedisTarget | str, name: str, max_connections: int, connection_options: dict):
    target = RedisTarget(target) if isinstance(target, str) else target
    options = dict(max_connections=max_connections, timeout=10, client_name=name, health_check_interval=10,
                   **connection_options)
    if not target.is_sentinel:
        return flavour.client(connection_pool=flavour.pool.from_url(target.url, **options))
    return flavour.client(connection_pool=_sentinel_pool(flavour, target, options))


def _sentinel_pool(flavour: _Flavour, target: RedisTarget, options: dict):
    tls = target.tls
    server = {**{k: v for k, v in target.options.items() if k not in ("ssl",) + _TLS_OPTIONS}, **tls}
    sentinel_options = {k: v for k, v in options.items() if k.startswith("socket_")}
    if target.sentinel_password:
        sentinel_options["password"] = target.sentinel_password
    if tls:
        sentinel_options.update(ssl=True, **tls)
    manager = flavour.sentinel(target.sentinels, sentinel_kwargs=sentinel_options)
    return flavour.sentinel_pool(target.master, manager, **server, **options,
                                 connection_class=flavour.connections[1] if tls else flavour.connections[0])


def database(url: str) -> int:
    """The database number a REDIS_URL names (0 if none)."""
    try:
        return RedisTarget(url).db
    except (RedisURLError, ValueError):
        return 0

