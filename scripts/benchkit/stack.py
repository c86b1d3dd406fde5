"""Everything the benchmark runs against, started on loopback and stopped at
the end: a Redis of its own, the fake upstream, one Switchboard web process,
its workers, llama-cpp-python's server and LiteLLM's proxy.

The bench's registry puts each kind of job on its own pool, so each worker
serves one measurement: `echo` on two gevent workers (the concurrency
target's "two workers of the gevent kind"), the local model on one thread
worker, the upstream models on one gevent worker.
"""
from __future__ import annotations

import os
import secrets
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from scripts.embedded_redis import EmbeddedRedis, free_port
from queue_config import BROKER_CONSUMER_CONNECTIONS, BROKER_POOL_LIMIT
from settings import settings_from_environment
from scripts.processes import (
    BIN, ROOT, Process, stack_env, start_fake_upstream, start_llama_server, start_web, start_worker, stop_together,
    wait_http_ready, wait_worker_ready,
)
from catalog.llamacpp import smollm2_gguf

LLAMA_KEY = "bench-llama-key"
LITELLM_KEY = "sk-" + secrets.token_hex(32)  # LiteLLM refuses to start without a strong master key
UPSTREAM_MODELS = ("paced", "instant")
ECHO_CONCURRENCY = 600  # greenlets per echo worker: two of them carry 1,000 streams
# (concurrency, queues, pool) of each worker process
WORKERS = ((ECHO_CONCURRENCY, "echo-completion,echo", "gevent"), (ECHO_CONCURRENCY, "echo-completion,echo", "gevent"),
           (100, "upstream-completion,upstream", "gevent"), (1, "local-completion,local", "threads"))
# Generous limits: the benchmark measures the path, not the admission control.
LIMITS = {"SWITCHBOARD_MAX_CONCURRENT": "5000", "SWITCHBOARD_MAX_QUEUE": "5000",
          "SWITCHBOARD_REQUESTS_PER_MINUTE": "1000000", "SWITCHBOARD_KEEPALIVE": "0.2"}
LITELLM_VENV = ROOT / ".venv-litellm"


def registry_text(upstream_url: str) -> str:
    models = {
        "echo": 'backend = "echo"\npool = "echo"\n',
        "echo:slow": 'backend = "echo"\npool = "echo"\ndelay_ms = 50\n',
        "smollm2:135m": 'backend = "llamacpp"\npool = "local"\nn_ctx = 2048\n',
        # on the one-slot local worker: jobs queue behind each other (the queued-abort case)
        "echo:local": 'backend = "echo"\npool = "local"\ndelay_ms = 50\n',
    }
    for name in UPSTREAM_MODELS:
        models[f"up-{name}"] = (f'backend = "openai"\npool = "upstream"\nbase_url = "{upstream_url}/v1"\n'
                                f'upstream_model = "{name}"\ncontext_length = 8192\nretries = 0\n')
    return "".join(f'[models."{name}"]\n{body}\n' for name, body in models.items())


@dataclass
class Endpoints:
    redis_url: str
    upstream_port: int
    web_port: int
    web: Process
    llama_port: int | None = None
    litellm_port: int | None = None
    processes: list[Process] = field(default_factory=list)


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


class BenchStack:
    """Start with `with BenchStack(...) as endpoints:`; all stops on exit."""

    def __init__(self, tokens: int, rate: float, llama: bool = True, litellm: bool = True):
        self.tokens, self.rate = tokens, rate
        self.llama, self.litellm = llama, litellm
        self._stack = ExitStack()
        self._processes: list[Process] = []

    def __enter__(self) -> Endpoints:
        try:
            return self._start()
        except BaseException:
            self._stack.close()
            raise

    def __exit__(self, *exc) -> None:
        self._stack.close()

    def _process(self, process: Process) -> Process:
        self._processes.append(process)  # stopped together on exit (_start)
        return process

    def _start(self) -> Endpoints:
        """Everything is launched first and waited for after: start-up
        (LiteLLM's takes many seconds) overlaps."""
        redis = EmbeddedRedis()
        self._stack.callback(redis.stop)
        self._stack.callback(lambda: stop_together(self._processes[::-1]))
        upstream_port = free_port()
        upstream = self._process(start_fake_upstream(upstream_port, self.tokens, self.rate, wait=False))
        litellm = self._launch_litellm(upstream_port) if self.litellm else None
        llama = None
        if self.llama:
            process, url = start_llama_server(smollm2_gguf(), LLAMA_KEY, ("--n_ctx", "2048"), wait=False)
            llama = (self._process(process), url)
        registry = Path(tempfile.mkdtemp(prefix="switchboard-bench-")) / "models.toml"
        registry.write_text(registry_text(f"http://127.0.0.1:{upstream_port}"))
        env = stack_env(redis.url, SWITCHBOARD_MODELS=str(registry), **LIMITS)
        # As the Procfile runs them: gevent for the echo and upstream pools, threads for the local model.
        workers = [self._process(start_worker(env, concurrency, queues, pool, wait=False))
                   for concurrency, queues, pool in WORKERS]
        workers.append(self._process(Process("floor-worker", [
            str(BIN / "celery"), "-A", "scripts.benchkit.celery_floor", "worker", "-P", "gevent", "-c", "10",
            "-Q", "floor", "--without-mingle", "--without-gossip", "--loglevel", "INFO"], env)))
        web, base = start_web(env, ("--worker-connections", "4000"), wait=False)
        self._process(web)
        wait_http_ready(upstream, f"http://127.0.0.1:{upstream_port}/v1/models")
        for worker in workers:
            wait_worker_ready(worker)
        wait_http_ready(web, f"{base}/api/version")
        endpoints = Endpoints(redis.url, upstream_port, port_of(base), web, processes=self._processes)
        if llama is not None:
            wait_http_ready(llama[0], f"{llama[1]}/v1/models", headers={"Authorization": f"Bearer {LLAMA_KEY}"})
            endpoints.llama_port = port_of(llama[1])
        if litellm is not None:
            wait_http_ready(litellm[0], f"http://127.0.0.1:{litellm[1]}/health/liveliness", timeout=120)
            endpoints.litellm_port = litellm[1]
        return endpoints

    def _launch_litellm(self, upstream_port: int) -> tuple[Process, int]:
        process, port = launch_litellm(upstream_port)
        return self._process(process), port


def launch_litellm(upstream_port: int, workers: int = 1, env: dict | None = None) -> tuple[Process, int]:
    """LiteLLM's proxy in front of the fake upstream, on a free port (wait for its /health/liveliness)."""
    python = LITELLM_VENV / "bin" / "python"
    if not python.exists():
        raise RuntimeError(f"LiteLLM is not installed in {LITELLM_VENV}; run `make install-dev`")
    config = Path(tempfile.mkdtemp(prefix="switchboard-litellm-")) / "config.yaml"
    # Its /v1/messages and /v1/responses would send openai/ models to OpenAI's
    # Responses API, which an OpenAI-compatible server (vLLM, llama.cpp, the
    # fake upstream) lacks: the setting, and the same upstream again with
    # use_chat_completions_api (bridged-*, LiteLLM's bridge to chat
    # completions), make both gateways reach it the same way.
    groups = (("up", ""), ("bridged", "      use_chat_completions_api: true\n"))
    config.write_text("litellm_settings:\n  use_chat_completions_url_for_anthropic_messages: true\n"
                      "model_list:\n" + "".join(
                          f"  - model_name: {group}-{name}\n    litellm_params:\n      model: openai/{name}\n"
                          f"      api_base: http://127.0.0.1:{upstream_port}/v1\n      api_key: unused\n{extra}"
                          for name in UPSTREAM_MODELS for group, extra in groups))
    port = free_port()
    # The local cost map: LiteLLM otherwise fetches one from GitHub at start.
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", LITELLM_LOG="ERROR", LITELLM_MASTER_KEY=LITELLM_KEY,
               **(env or {}))
    process = Process("litellm", [
        str(LITELLM_VENV / "bin" / "litellm"), "--config", str(config), "--host", "127.0.0.1",
        "--port", str(port), "--num_workers", str(workers)], env)
    return process, port


def redis_connection_bound() -> int:
    """The most Redis connections the stack may hold, whatever the load: per
    Switchboard process its bounded pool, its one pub/sub connection (the
    relay, or the abort listener) and Celery's broker connections; plus the
    Celery floor worker's."""
    per_process = settings_from_environment().redis_connections + 1 + BROKER_POOL_LIMIT + BROKER_CONSUMER_CONNECTIONS
    return per_process * (1 + len(WORKERS)) + BROKER_POOL_LIMIT + BROKER_CONSUMER_CONNECTIONS + 1
