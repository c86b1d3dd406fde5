"""`python -m workers`: Celery's worker command without the umbrella `celery`
command's interactive shell (prompt_toolkit: 15 MB), and gevent's patches
first when asked for."""
from __future__ import annotations

import pytest

from tests.unit.own_process import run_apart

PROBE = """
import contextlib, io, json, runpy, sys
sys.argv = ["workers", *{args!r}, "--help"]
shown = io.StringIO()
with contextlib.redirect_stdout(shown), contextlib.suppress(SystemExit):
    runpy.run_module("workers", run_name="__main__", alter_sys=True)
from gevent import monkey
print(json.dumps({{"options": "--concurrency" in shown.getvalue(), "prompt_toolkit": "prompt_toolkit" in sys.modules,
                  "click_repl": "click_repl" in sys.modules, "patched": monkey.is_module_patched("socket")}}))
"""


@pytest.mark.parametrize("pool, patched", [("gevent", True), ("threads", False)])
def test_the_worker_command_loads_no_terminal_libraries_and_patches_for_gevent(pool, patched):
    found = run_apart(PROBE.format(args=["-P", pool]))
    assert found["options"]  # Celery's own worker options
    assert (found["prompt_toolkit"], found["click_repl"], found["patched"]) == (False, False, patched)
