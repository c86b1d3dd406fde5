"""Real processes for the integration tests and the benchmark: a Celery
worker, a gunicorn web server and llama-cpp-python's own server, each in its
own process group, killed at the end. Their output goes to a temporary log
file, removed when the process stops (kept with SWITCHBOARD_KEEP_LOGS=1, for
debugging a failed test)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Callable

import httpx

from scripts.children import starting, track, untrack
from scripts.embedded_redis import free_port

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


class Process:
    def __init__(self, name: str, argv: list[str], env: dict, cwd: Path = ROOT):
        self.name = name
        self.until_ready: Callable[[], None] = lambda: None  # set by the starter: waits until it serves
        self.log = tempfile.NamedTemporaryFile(prefix=f"switchboard-{name}-", suffix=".log", delete=False)
        with starting():
            self.popen = subprocess.Popen(argv, cwd=cwd, env=env, stdout=self.log, stderr=subprocess.STDOUT,
                                          start_new_session=True)
            track(self)

    def output(self) -> str:
        path = Path(self.log.name)
        return path.read_text(errors="replace") if path.exists() else ""

    def check_alive(self) -> None:
        if self.popen.poll() is not None:
            raise RuntimeError(f"{self.name} exited with {self.popen.returncode}:\n{self.output()[-3000:]}")

    def begin_stop(self) -> None:
        """SIGTERM to its process group, without waiting (stop waits)."""
        if self.popen.poll() is None:
            try:
                os.killpg(self.popen.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10) -> None:
        untrack(self)
        if self.popen.poll() is None:
            os.killpg(self.popen.pid, sig)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait()
        self.log.close()
        if os.path.exists(self.log.name) and not os.environ.get("SWITCHBOARD_KEEP_LOGS"):
            os.unlink(self.log.name)


def stop_together(processes: list[Process]) -> None:
    """Stop them all at once: a Celery worker takes seconds to stop, and a
    benchmark stack's took 18 s one after another, 4 s together."""
    for process in processes:
        process.begin_stop()
    for process in processes:
        process.stop()


# A local worker's slots, as the Procfile starts it: the default model's 4 sequences and its spare one.
WORKER_SLOTS = 5


def stack_env(redis_url: str, **extra: str) -> dict:
    env = dict(os.environ, REDIS_URL=redis_url, PYTHONUNBUFFERED="1", **extra)
    env["PATH"] = os.pathsep.join([str(BIN), env.get("PATH", "")])
    return env


def start_worker(env: dict, concurrency: int = WORKER_SLOTS, queues: str = "local-completion,local", pool: str = "threads",
                 wait: bool = True, cwd: Path = ROOT) -> Process:
    """A Celery worker (of the source tree `cwd`); with wait=False, call
    wait_worker_ready before use."""
    # (an older tree, in the benchmark, has only Celery's own command)
    command = [str(BIN / "python"), "-m", "workers"] if (cwd / "workers" / "__main__.py").exists() else [
        str(BIN / "celery"), "-A", "queue_config", "worker"]
    worker = Process("worker", [
        *command, "-P", pool, "-c", str(concurrency),
        "-Q", queues, "-n", f"test-{uuid.uuid4().hex[:8]}@%h", "--loglevel", "INFO", "--without-mingle",
        "--without-gossip",
    ], env, cwd)
    worker.until_ready = lambda: wait_worker_ready(worker)
    if wait:
        worker.until_ready()
    return worker


def start_mcp_pool(env: dict, wait: bool = True, cwd: Path = ROOT) -> Process:
    """An MCP pool process (the MCP gateway's sessions with the registry's servers)."""
    pool = Process("mcp-pool", [str(BIN / "python"), "-m", "workers.mcp.pool"], env, cwd)
    pool.until_ready = lambda: _wait_for_line(pool, " ready: servers ")
    if wait:
        pool.until_ready()
    return pool


def _wait_for_line(process: Process, text: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while text not in process.output():
        process.check_alive()
        if time.monotonic() > deadline:
            raise RuntimeError(f"{process.name} not ready:\n{process.output()[-3000:]}")
        time.sleep(0.1)


def wait_worker_ready(worker: Process, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while " ready." not in worker.output():
        worker.check_alive()
        if time.monotonic() > deadline:
            raise RuntimeError(f"worker not ready:\n{worker.output()[-3000:]}")
        time.sleep(0.1)


def wait_http_ready(process: Process, url: str, headers: dict | None = None, timeout: float = 60,
                    answered: Callable[[httpx.Response], bool] = lambda response: response.is_success) -> None:
    """Until GET url is `answered` (by default: succeeds); fails at once if
    the process died."""
    deadline = time.monotonic() + timeout
    while True:
        process.check_alive()
        try:
            if answered(httpx.get(url, headers=headers, timeout=1)):
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{process.name} not ready:\n{process.output()[-3000:]}")
        time.sleep(0.1)


def start_web(env: dict, extra_args: tuple[str, ...] = (), wait: bool = True, processes: int = 1,
              cwd: Path = ROOT, port: int | None = None) -> tuple[Process, str]:
    """gunicorn with `processes` gevent workers (of the source tree `cwd`), on `port` (else a free one)."""
    port = port or free_port()
    # The configuration names gevent's worker, or (older trees) the command line does.
    configuration = cwd / "gunicorn.conf.py"
    named = configuration.exists() and "worker_class" in configuration.read_text()
    worker = () if named else ("-k", "gevent")
    web = Process("web", [
        str(BIN / "gunicorn"), *worker, "-w", str(processes), "-b", f"127.0.0.1:{port}",
        "--no-control-socket", *extra_args, "app:create_app()",
    ], env, cwd)
    base = f"http://127.0.0.1:{port}"
    web.until_ready = lambda: wait_http_ready(web, f"{base}/api/version")
    if wait:
        web.until_ready()
    return web, base


def ready_together(processes: list[Process]) -> None:
    """Wait for processes started side by side (wait=False: each spends
    seconds importing, and two start in about the time of one); if one
    fails, all are stopped (no process outlives a failed start)."""
    try:
        for process in processes:
            process.until_ready()
    except BaseException:
        for process in processes:
            process.stop()
        raise


def start_stack(env: dict, concurrency: int = WORKER_SLOTS, web_env: dict | None = None,
                queues: str = "local-completion,local") -> tuple[Process, Process, str]:
    """A worker and a web process, started side by side."""
    worker = start_worker(env, concurrency=concurrency, queues=queues, wait=False)
    try:
        web, base = start_web(dict(env, **(web_env or {})), wait=False)
    except BaseException:
        worker.stop()
        raise
    ready_together([worker, web])
    return worker, web, base


def commit_of(tree: Path) -> str:
    """A source tree's commit, for a report ("commit abc1234"; its path, if it is not a git checkout)."""
    found = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return f"commit {found.stdout.strip()}" if found.returncode == 0 else str(tree)


def start_fake_upstream(port: int, tokens: int = 64, rate: float = 200, capacity: int = 0,
                        wait: bool = True, extra: tuple[str, ...] = ()) -> Process:
    """The benchmark's OpenAI-compatible upstream (scripts/benchkit/upstream.py)
    on `port`, with its `extra` options; with wait=False, call wait_http_ready
    on /v1/models before use."""
    process = Process("upstream", [sys.executable, "-m", "scripts.benchkit.upstream", "--port", str(port),
                                   "--tokens", str(tokens), "--rate", str(rate), "--capacity", str(capacity),
                                   *extra], stack_env("redis://unused"))
    if wait:
        wait_http_ready(process, f"http://127.0.0.1:{port}/v1/models")
    return process


def start_llama_server(gguf: Path, api_key: str, extra_args: tuple[str, ...] = (),
                       wait: bool = True) -> tuple[Process, str]:
    """llama-cpp-python's own OpenAI-compatible server on the given GGUF."""
    port = free_port()
    process = Process("llama-server", [
        sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--host", "127.0.0.1",
        "--port", str(port), "--api_key", api_key, *extra_args,
    ], stack_env("redis://unused"))
    url = f"http://127.0.0.1:{port}"
    if wait:
        wait_http_ready(process, f"{url}/v1/models", headers={"Authorization": f"Bearer {api_key}"})
    return process, url
