"""`make run`: start the web process and a worker (the Procfile) with honcho,
on a Redis found or started by scripts/embedded_redis.py.

PORT (default 11434, Ollama's) is the web port; honcho gives the web line,
which must stay first in the Procfile, exactly that port. Ended by Ctrl-C,
SIGTERM or SIGHUP, it stops everything it started (scripts/children.py).
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from protocol.connection import redacted  # noqa: E402
from scripts.children import starting, stop_all, stop_on_signals, track, untrack  # noqa: E402
from scripts.embedded_redis import resolve_redis  # noqa: E402
from settings import settings_from_environment  # noqa: E402


class Honcho:
    """honcho running the Procfile. Stopping it stops the web process and the
    workers: honcho passes SIGTERM on and waits for them. A SIGTERM that
    reaches honcho 2.0 before it has started every process makes it fail
    (its _killall) and leave them running, so it is sent only once every
    process has started (or a few seconds passed); whatever of its process
    tree is still left after it exits gets SIGTERM itself (a warm shutdown),
    and SIGKILL after the grace period."""

    def __init__(self, env: dict, port: str):
        with starting():
            self.popen = subprocess.Popen(
                [sys.executable, "-m", "honcho", "start", "-f", str(ROOT / "Procfile"), "-p", port], cwd=ROOT, env=env)
            track(self)

    def stop(self, grace_seconds: float = 30) -> None:
        untrack(self)
        tree = self._tree_once_started(deadline=time.monotonic() + 10)
        self.popen.terminate()
        _, alive = psutil.wait_procs([psutil.Process(self.popen.pid)] if self.popen.poll() is None else [], 5)
        for process in alive:
            process.kill()
        self.popen.wait()
        _stop_processes(tree, grace_seconds)


    def _tree_once_started(self, deadline: float) -> list[psutil.Process]:
        """honcho's process tree, once it runs a shell for every Procfile line."""
        lines = sum(1 for line in (ROOT / "Procfile").read_text().splitlines() if ":" in line)
        while True:
            try:
                tree = psutil.Process(self.popen.pid).children(recursive=True)
            except psutil.NoSuchProcess:
                return []
            if sum(1 for p in tree if _command(p)[:1] == ["/bin/sh"]) >= lines or time.monotonic() > deadline:
                return tree
            time.sleep(0.05)


def _command(process: psutil.Process) -> list[str]:
    try:
        return process.cmdline()
    except psutil.Error:
        return []


def _stop_processes(processes: list[psutil.Process], grace_seconds: float) -> None:
    for process in processes:
        try:
            process.terminate()
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(processes, grace_seconds)
    for process in alive:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass


def main() -> int:
    stop_on_signals()
    url, embedded = resolve_redis(settings_from_environment().data_dir)
    kept = f" (embedded, keeping its data in {embedded.dir})" if embedded else ""
    print(f"switchboard: using Redis at {redacted(url)}{kept}", flush=True)
    env = dict(os.environ, REDIS_URL=url)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    honcho = Honcho(env, env.get("PORT", "11434"))
    try:
        return honcho.popen.wait()
    finally:
        stop_all()  # honcho, then the embedded Redis (newest first)

if __name__ == "__main__":
    sys.exit(main())
