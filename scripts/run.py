"""`make run`: start the web process and a worker (the Procfile) with honcho,
on a Redis found or started by scripts/embedded_redis.py.

PORT (default 11434, Ollama's) is the web port; honcho gives the web line,
which must stay first in the Procfile, exactly that port.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scripts.embedded_redis import resolve_redis  # noqa: E402


def main() -> int:
    url, embedded = resolve_redis()
    print(f"switchboard: using Redis at {url}" + (" (embedded)" if embedded else ""), flush=True)
    env = dict(os.environ, REDIS_URL=url)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    port = env.get("PORT", "11434")
    try:
        return subprocess.call(
            [sys.executable, "-m", "honcho", "start", "-f", str(ROOT / "Procfile"), "-p", port], cwd=ROOT, env=env
        )
    except KeyboardInterrupt:
        return 0
    finally:
        if embedded:
            embedded.stop()


if __name__ == "__main__":
    sys.exit(main())
