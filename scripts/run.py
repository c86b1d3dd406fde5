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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scripts.children import stop_all, stop_on_signals, track, untrack  # noqa: E402
from scripts.embedded_redis import resolve_redis  # noqa: E402


class Honcho:
    """honcho running the Procfile; stopping it stops the web process and the
    worker (honcho passes SIGTERM on and waits for them)."""

    def __init__(self, env: dict, port: str):
        self.popen = subprocess.Popen(
            [sys.executable, "-m", "honcho", "start", "-f", str(ROOT / "Procfile"), "-p", port], cwd=ROOT, env=env)
        track(self)

    def stop(self, grace_seconds: float = 30) -> None:
        untrack(self)
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(grace_seconds)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()


def main() -> int:
    stop_on_signals()
    url, embedded = resolve_redis()
    print(f"switchboard: using Redis at {url}" + (" (embedded)" if embedded else ""), flush=True)
    env = dict(os.environ, REDIS_URL=url)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    honcho = Honcho(env, env.get("PORT", "11434"))
    try:
        return honcho.popen.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        stop_all()  # honcho, then the embedded Redis (newest first)

if __name__ == "__main__":
    sys.exit(main())
