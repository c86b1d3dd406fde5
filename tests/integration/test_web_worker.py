"""The web process as the Procfile starts it: gunicorn's master supervises
without gevent (gunicorn.conf.py's worker class imports it once forked),
and the worker it forks serves requests under gevent's patches."""
from __future__ import annotations

import subprocess
from pathlib import Path

import httpx

from scripts.processes import stack_env, start_web


def _gevent_libraries(pid: int) -> set[str]:
    """gevent's compiled modules mapped into a process (each imported one is)."""
    lines = Path(f"/proc/{pid}/maps").read_text().splitlines()
    return {Path(line.split()[-1]).name for line in lines if "/gevent/" in line and line.endswith(".so")}


def test_the_master_holds_no_gevent_and_its_worker_serves_under_it(redis_url):
    web, base = start_web(stack_env(redis_url))
    try:
        assert "-k" not in web.popen.args  # the configuration names the worker, as under the Procfile
        assert httpx.get(f"{base}/api/version", timeout=10).status_code == 200
        worker = int(subprocess.check_output(["pgrep", "-P", str(web.popen.pid)]).split()[0])
        assert _gevent_libraries(web.popen.pid) == set()
        assert any(name.startswith("_gevent_c_hub") for name in _gevent_libraries(worker))
        assert "Using worker: GeventWorker" in web.output()
    finally:
        web.stop()
