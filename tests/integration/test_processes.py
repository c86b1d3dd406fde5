"""Process-level facts: the embedded Redis, the abort listener, import rules."""
from __future__ import annotations

import subprocess
import sys
import time
import uuid

import redis

from jobqueue.records import record_state, send_abort, worker_lost
from protocol.keys import alive_key
from scripts.embedded_redis import EmbeddedRedis
from workers.abort_watch import AbortWatch


def test_embedded_redis_is_a_real_server_and_stops():
    server = EmbeddedRedis()
    try:
        client = redis.Redis.from_url(server.url)
        assert client.info("server")["redis_version"]
        client.set("k", "v")
        assert client.get("k") == b"v"
    finally:
        server.stop()
    assert server.process.poll() is not None


def test_abort_watch_hears_a_running_jobs_abort(clean_redis, redis_url):
    watch, job_id = AbortWatch(redis.Redis.from_url(redis_url)), uuid.uuid4().hex
    with watch.watch(job_id, time.monotonic()) as flag:
        assert not flag.is_set()
        send_abort(clean_redis, job_id)
        deadline = time.monotonic() + 1
        while not flag.is_set() and time.monotonic() < deadline:
            time.sleep(0.005)
        assert flag.is_set()


def test_front_end_imports_no_worker_code():
    """After create_app() (and a described GGUF model), no module of the
    worker side, no model runtime and no upstream HTTP client is loaded."""
    code = (
        "import sys; from app import create_app; create_app({'redis_url': 'redis://127.0.0.1:1/0'});"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('workers', 'llama_cpp', 'httpx', 'httpcore'));"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_job_whose_heartbeat_stopped_is_lost_unless_it_finished(clean_redis):
    job_id = uuid.uuid4().hex
    clean_redis.set(alive_key(job_id), b"1")
    assert not worker_lost(clean_redis, job_id)
    clean_redis.delete(alive_key(job_id))
    record_state(clean_redis, job_id, status="running")
    assert worker_lost(clean_redis, job_id)
    record_state(clean_redis, job_id, status="finished", reason="stop")  # its final event is on its way
    assert not worker_lost(clean_redis, job_id)
