"""`python -m workers`: Celery's worker command without the umbrella `celery`
command's interactive shell (prompt_toolkit: 15 MB), and gevent's patches first when asked for."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import runpy, sys
sys.argv = ["workers", *{args!r}, "--help"]
try:
    runpy.run_module("workers", run_name="__main__", alter_sys=True)
except SystemExit:
    pass
from gevent import monkey
print("prompt_toolkit" in sys.modules, "click_repl" in sys.modules, monkey.is_module_patched("socket"))
"""


@pytest.mark.parametrize("pool, patched", [("gevent", "True"), ("threads", "False")])
def test_the_worker_command_loads_no_terminal_libraries_and_patches_for_gevent(pool, patched):
    ran = subprocess.run([sys.executable, "-c", PROBE.format(args=["-P", pool])], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert "--concurrency" in ran.stdout, ran.stderr[-2000:]  # Celery's own worker options
    assert ran.stdout.split()[-3:] == ["False", "False", patched]
