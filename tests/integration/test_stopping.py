"""Launchers leave nothing behind: `make run`'s launcher and the benchmark,
sent SIGTERM (a supervisor, `timeout`) or SIGINT (Ctrl-C) while their
processes run, stop every process they started."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from scripts.embedded_redis import EmbeddedRedis, free_port
from scripts.processes import ROOT

pytestmark = pytest.mark.slow


def _wait_for(condition, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def _descendants_once_running(launcher: subprocess.Popen, names: set[str], seconds: float) -> list[psutil.Process]:
    """The launcher's process tree, once a process of each name runs in it."""
    tree: list[psutil.Process] = []

    def all_running() -> bool:
        nonlocal tree
        assert launcher.poll() is None, f"the launcher exited with {launcher.returncode}"
        tree = psutil.Process(launcher.pid).children(recursive=True)
        commands = "\n".join(_cmdline(p) for p in tree)
        return all(name in commands for name in names)

    _wait_for(all_running, seconds, f"not all of {sorted(names)} started")
    return tree


def _cmdline(process: psutil.Process) -> str:
    try:
        return " ".join(process.cmdline())
    except psutil.Error:
        return ""


def _left_running(tree: list[psutil.Process]) -> list[psutil.Process]:
    alive = []
    for process in tree:
        try:
            if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                alive.append(process)
        except psutil.NoSuchProcess:
            pass
    return alive


def _assert_all_gone(tree: list[psutil.Process], launcher: subprocess.Popen, seconds: float = 60) -> None:
    launcher.wait(seconds)
    _wait_for(lambda: not _left_running(tree), seconds,
              "left running: " + ", ".join(_cmdline(p)[:80] for p in _left_running(tree)))


def _kill(launcher: subprocess.Popen, tree: list[psutil.Process]) -> None:
    """After a failure: nothing of it may outlive the test."""
    for process in [launcher, *_left_running(tree)]:
        try:
            process.kill()
        except (psutil.Error, ProcessLookupError):
            pass


def _ignore_sigint() -> None:
    """As a shell without job control starts `make run &`."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.parametrize("sig, preexec", [(signal.SIGTERM, None), (signal.SIGINT, None),
                                          (signal.SIGINT, _ignore_sigint)],
                         ids=["SIGTERM", "SIGINT", "SIGINT-started-in-the-background"])
def test_make_runs_launcher_stops_the_web_process_and_the_workers(sig, preexec):
    redis = EmbeddedRedis()
    env = dict(os.environ, REDIS_URL=redis.url, PORT=str(free_port()), WORKER_CONCURRENCY="1",
               UPSTREAM_CONCURRENCY="2")
    launcher = subprocess.Popen([sys.executable, "scripts/run.py"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, preexec_fn=preexec)
    tree: list[psutil.Process] = []
    try:
        tree += _descendants_once_running(launcher, {"gunicorn", "-m workers"}, 90)
        launcher.send_signal(sig)  # to the launcher alone, as a supervisor does
        _assert_all_gone(tree, launcher)
    finally:
        _kill(launcher, tree)
        redis.stop()


def test_the_benchmark_stopped_midway_stops_everything_it_started(tmp_path):
    launcher = subprocess.Popen([sys.executable, "scripts/bench.py", "--tiny", "--out", str(tmp_path)], cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    tree: list[psutil.Process] = []
    try:
        tree += _descendants_once_running(launcher, {"redis-server", "gunicorn", "-m workers"}, 120)
        launcher.send_signal(signal.SIGTERM)
        _assert_all_gone(tree, launcher)
    finally:
        _kill(launcher, tree)
