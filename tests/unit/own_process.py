"""Run a snippet in a Python process of its own (what it imports, how it
starts, stay its own), as it is or monkey-patched by gevent as the web
process and the upstream workers are; it prints one JSON object, which is
returned."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_apart(snippet: str, environment: dict[str, str] | None = None) -> dict:
    """`environment`: the process's whole environment (by default this one's)."""
    result = subprocess.run([sys.executable, "-c", snippet], cwd=ROOT, env=environment, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def run_under_gevent(snippet: str) -> dict:
    return run_apart("from gevent import monkey; monkey.patch_all()\n" + snippet)
