"""Failures through real processes on a Redis of their own: a worker killed
mid-job, two workers on one queue, Redis restarted mid-run, graceful
shutdown of the web and of a worker."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time

import httpx
import pytest

from jobqueue.records import job_state
from protocol.keys import job_of_channel
from scripts.embedded_redis import EmbeddedRedis
from scripts.processes import stack_env, start_stack, start_web, start_worker, stop_together
from tests.integration.events_tap import EventsTap
from tests.integration.http import DroppableStream, post_raw
from tests.integration.waits import queued, wait_until

SLOW = {"model": "echo:slow", "messages": [{"role": "user", "content": " ".join(f"w{i}" for i in range(200))}]}


@pytest.fixture
def own_redis():
    server = EmbeddedRedis()
    yield server
    server.stop()


@pytest.fixture
def env(own_redis):
    return stack_env(own_redis.url, SWITCHBOARD_HEARTBEAT_TIMEOUT="2")


def read_all(stream: DroppableStream) -> list[dict]:
    lines = []
    while (line := stream.read_line()):
        lines.append(json.loads(line))
    return lines


def test_a_worker_killed_mid_job_ends_the_stream_with_an_error(env, own_redis):
    import redis

    worker, web, base = start_stack(env, 2)
    try:
        stream = DroppableStream(base, "/api/chat", SLOW)
        assert stream.read_line()
        worker.stop(signal.SIGKILL)
        killed = time.monotonic()
        lines = read_all(stream)
        assert lines[-1] == {"error": "the worker running this job stopped; try again"}
        assert time.monotonic() - killed < 5
        client = redis.Redis.from_url(own_redis.url)
        states = [job_state(client, k.decode().split(":")[2]) for k in client.scan_iter(match="switchboard:job:*:state")]
        assert [s["reason"] for s in states] == ["error"] and states[0]["error"] == "worker lost"
        metrics = httpx.get(f"{base}/metrics").text  # a lost job is counted, with a reason of its own
        assert 'switchboard_jobs_finished_total{model="echo:slow",reason="worker_lost"} 1.0' in metrics
    finally:
        web.stop()
        worker.stop()


def ended(tap: EventsTap) -> list[str]:
    """The channel of every done event the tap heard."""
    return [ch for _, ch, data in tap.messages if data.startswith(b'{"type":"done"')]


def test_two_workers_share_a_queue_and_no_job_runs_twice(env, own_redis):
    workers = [start_worker(env, concurrency=2) for _ in range(2)]
    web, base = start_web(env)
    tap = EventsTap(own_redis.url)
    try:
        def ask(i):
            return httpx.post(f"{base}/api/chat", json={"model": "echo:slow", "stream": False, "messages": [
                {"role": "user", "content": f"job {i} a b c"}]}, timeout=60).json()["message"]["content"]
        results = {}
        threads = [threading.Thread(target=lambda i=i: results.__setitem__(i, ask(i))) for i in range(12)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert results == {i: f"job {i} a b c" for i in range(12)}
        # the tap hears the last events a moment after the clients read them
        wait_until(lambda: len(ended(tap)) >= 12, what="the tap to hear every job end")
        started = ended(tap)
        assert len(started) == len(set(started)) == 12  # each job ran (and ended) exactly once
        import redis

        client = redis.Redis.from_url(own_redis.url)
        ran_on = {job_state(client, job_of_channel(ch))["worker"] for ch in started}
        assert len(ran_on) == 2  # spread over both workers
    finally:
        tap.close()
        stop_together([web, *workers])


def test_redis_restarted_mid_run(env, own_redis):
    worker, web, base = start_stack(env, 2)
    try:
        stream = DroppableStream(base, "/api/chat", SLOW)
        assert stream.read_line()
        port = own_redis.port
        own_redis.stop()
        stopped = time.monotonic()
        lines = read_all(stream)
        assert "error" in lines[-1] and time.monotonic() - stopped < 10
        restarted = EmbeddedRedis(port=port)
        try:
            deadline = time.monotonic() + 45
            while True:  # the web and worker processes reconnect by themselves
                status, _, body = post_raw(base, "/api/chat", {"model": "echo", "stream": False, "messages": [
                    {"role": "user", "content": "back again"}]})
                if status == 200:
                    assert json.loads(body)["message"]["content"] == "back again"
                    break
                assert time.monotonic() < deadline, (status, body)
                time.sleep(0.5)
            # ready again once the worker's next beat has told this forgetting Redis it is there
            wait_until(lambda: httpx.get(f"{base}/readyz").status_code == 200, 10, "/readyz to say ready")
        finally:
            restarted.stop()
    finally:
        web.stop()
        worker.stop()


def test_graceful_shutdown_finishes_open_streams(env):
    worker, web, base = start_stack(env, 2)
    try:
        short = {"model": "echo:slow", "messages": [{"role": "user", "content": "one two three four five six"}]}
        stream = DroppableStream(base, "/api/chat", short)
        assert stream.read_line()
        web.popen.send_signal(signal.SIGTERM)  # gunicorn: stop accepting, finish open requests
        worker.popen.send_signal(signal.SIGTERM)  # celery: warm shutdown, finish the current job
        lines = read_all(stream)
        assert lines[-1]["done"] is True
        assert "".join(l["message"]["content"] for l in lines) == " two three four five six"
        web.popen.wait(15)
        worker.popen.wait(15)
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{base}/api/version")
    finally:
        web.stop()
        worker.stop()


def test_a_model_the_web_knows_but_no_worker_does_gets_a_prompt_clear_404(env, tmp_path):
    """Registries out of sync during a deploy: the web process was given a
    model the worker's registry lacks; the client is told at once."""
    registry = tmp_path / "models.toml"
    registry.write_text(open("models.toml").read() + '\n[models."fresh"]\nbackend = "echo"\n')
    worker, web, base = start_stack(env, 1, dict(SWITCHBOARD_MODELS=str(registry)))
    try:
        started = time.monotonic()
        status, _, body = post_raw(base, "/api/chat", {"model": "fresh", "messages": [
            {"role": "user", "content": "hi"}]})
        assert status == 404 and time.monotonic() - started < 10  # not the 300 s queue wait
        assert json.loads(body)["error"].startswith('model "fresh" is not served by any worker that took the job')
        assert post_raw(base, "/api/chat", {"model": "echo", "stream": False, "messages": [
            {"role": "user", "content": "still fine"}]})[0] == 200
    finally:
        web.stop()
        worker.stop()


def test_a_stream_still_open_at_the_end_of_the_grace_period_ends_with_an_error_and_its_job_aborted(env, own_redis):
    import redis

    worker, web, base = start_stack(env, 2, dict(SWITCHBOARD_GRACEFUL_TIMEOUT="4"))
    try:
        stream = DroppableStream(base, "/api/chat", SLOW)  # 200 tokens at 50 ms: longer than the grace period
        assert stream.read_line()
        os.killpg(web.popen.pid, signal.SIGTERM)
        signalled = time.monotonic()
        lines = read_all(stream)
        assert lines[-1] == {"error": "the server is shutting down and ended this stream at the end of its grace "
                                      "period; try again"}
        assert all("message" in line for line in lines[:-1]) and time.monotonic() - signalled < 4
        client = redis.Redis.from_url(own_redis.url)
        job_id = next(k.decode().split(":")[2] for k in client.scan_iter(match="switchboard:job:*:state"))
        wait_until(lambda: job_state(client, job_id).get("reason") == "aborted", 10, "the job to be aborted")
        web.popen.wait(15)
    finally:
        web.stop()
        worker.stop()


def gunicorn_worker_pid(web) -> int:
    """The gunicorn worker process (the master's child) that serves requests."""
    return int(subprocess.check_output(["pgrep", "-P", str(web.popen.pid)]).split()[0])


def test_a_killed_web_process_frees_its_slots_and_stops_its_jobs_within_seconds(env, own_redis):
    import redis

    worker, web, base = start_stack(env, 4, dict(SWITCHBOARD_API_KEYS="alice:alice-key",
                                                 SWITCHBOARD_MAX_CONCURRENT="3"))
    headers = {"Authorization": "Bearer alice-key"}
    try:
        streams = [DroppableStream(base, "/api/chat", SLOW, headers) for _ in range(3)]
        for stream in streams:
            assert stream.read_line()
        client = redis.Redis.from_url(own_redis.url)
        streams.append(DroppableStream(base, "/api/chat", SLOW, headers))  # all 3 slots held: it waits its turn
        wait_until(queued(client, "local"), what="alice's fourth job to wait")
        os.kill(gunicorn_worker_pid(web), signal.SIGKILL)  # OOM, a worker timeout: no cleanup runs
        killed = time.monotonic()
        job_ids = [k.decode().split(":")[2] for k in client.scan_iter(match="switchboard:job:*:state")]
        assert len(job_ids) == 3  # the fourth never started
        wait_until(lambda: all(job_state(client, j).get("reason") == "aborted" for j in job_ids), 20,
                   "the orphaned jobs to be aborted")
        # gunicorn's master starts a new worker; the dead one's slots are free again
        wait_until(lambda: post_raw(base, "/api/chat", {"model": "echo", "stream": False, "messages": [
            {"role": "user", "content": "back"}]}, headers)[0] == 200, 20, "alice to be admitted again")
        assert time.monotonic() - killed < 20  # not the 900 s of the old stale bound
    finally:
        for stream in streams:
            stream.drop()
        web.stop()
        worker.stop()


def test_a_finished_job_leaves_only_its_state_for_the_retention_time(env, own_redis):
    import redis

    env = dict(env, SWITCHBOARD_RECORD_SECONDS="30")
    worker, web, base = start_stack(env, 1)
    try:
        for _ in range(3):
            assert post_raw(base, "/api/chat", {"model": "echo", "stream": False, "messages": [
                {"role": "user", "content": "keep little"}]})[0] == 200
        client = redis.Redis.from_url(own_redis.url)
        per_job = [k.decode() for k in client.scan_iter(match="switchboard:job:*")]
        assert sorted(k.rsplit(":", 1)[1] for k in per_job) == ["state"] * 3
        assert all(0 < client.ttl(k) <= 30 for k in per_job)
    finally:
        web.stop()
        worker.stop()


def test_two_deployments_on_one_redis_server_count_only_their_own_streams(stack, redis_url):
    """Pub/sub is server-wide: channels carry the database, so /metrics of
    one deployment does not count the other's streams."""
    other_db = redis_url.rsplit("/", 1)[0] + "/12"
    web, base = start_web(stack_env(other_db))
    try:
        waiting = DroppableStream(base, "/api/chat", {"model": "echo", "messages": [
            {"role": "user", "content": "no worker on db 12"}]})
        wait_until(lambda: "switchboard_active_streams 1.0" in httpx.get(f"{base}/metrics").text, 10,
                   "the other deployment to count its stream")
        assert "switchboard_active_streams 0.0" in httpx.get(f"{stack}/metrics").text
        waiting.drop()
    finally:
        web.stop()
        import redis

        redis.Redis.from_url(other_db).flushdb()  # the job it queued there, and its records
