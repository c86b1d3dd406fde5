"""The floor of Switchboard's design, for section 18: the least any gateway
built as it is (a Flask web process on gevent, a Celery message to a gevent
worker, the upstream call there, the reply back over Redis pub/sub) can cost
a request, with none of Switchboard's own work (no keys, admission, fair
queue, records, translation, events).

The web app (`web`, served by gunicorn's gevent worker) answers chat
completions, whole: it sends the body in a Celery task and waits on one
pattern subscription for the reply. The task's message is sent as
Switchboard's web process sends its tickets (the Celery message
jobqueue.wakeups writes, on one held kombu connection): the cheapest way
Celery allows. The worker (`celery -A scripts.benchkit.design_floor worker
-P gevent`, configured as Switchboard's: its broker transport and options,
prefetch 1, no prefetch while busy, acks early) calls the upstream on a kept-alive connection
and publishes the reply's text. Both halves live in this module so that the
floor is read in one place; the benchmark starts each in its own process.
"""
from __future__ import annotations

import http.client
import json
import os
import time
import uuid
from contextlib import ExitStack
from queue import Empty, LifoQueue

import kombu
import redis
from celery import Celery

from broker_transport import connection_options
from jobqueue.wakeups import publish_task
from protocol.connection import RedisTarget
from settings import settings_from_environment

QUEUE = "floor"
TASK = "bench.design_floor"
CHANNELS = "floor:reply:"
NAME = "floor (flask + celery, nothing else)"

_broker = connection_options(RedisTarget.of(settings_from_environment()))  # (queue_config's, read the same way)
celery = Celery("floor", broker=_broker["hostname"])
celery.conf.update(task_serializer="json", accept_content=["json"], task_ignore_result=True,
                   worker_prefetch_multiplier=1, worker_disable_prefetch=True, task_acks_late=False,
                   broker_transport=_broker["transport"], broker_transport_options=_broker["transport_options"],
                   broker_use_ssl=_broker["ssl"], worker_send_task_events=False, worker_hijack_root_logger=False)
_client = redis.Redis.from_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
_connections: LifoQueue = LifoQueue()


@celery.task(name=TASK)
def answer(message: dict) -> None:
    """The worker's half: the upstream's reply to the body, published whole."""
    job, body = message["job"], message["body"]
    try:
        connection = _connections.get_nowait()
    except Empty:
        connection = http.client.HTTPConnection("127.0.0.1", int(os.environ["FLOOR_UPSTREAM_PORT"]), timeout=30)
    connection.request("POST", "/v1/chat/completions", json.dumps(body | {"model": "instant"}),
                       {"Content-Type": "application/json"})
    reply = json.loads(connection.getresponse().read())
    _connections.put(connection)
    _client.publish(CHANNELS + job, json.dumps(reply["choices"][0]["message"]["content"]))


def web():
    """The web's half (a Flask app; gunicorn's gevent worker patched the
    sockets before it is made)."""
    import gevent
    from flask import Flask, jsonify, request
    from gevent.event import AsyncResult, Event
    from gevent.lock import Semaphore

    app, waiting, listening, producer, sending = Flask("floor"), {}, Event(), [], Semaphore()

    def relay() -> None:
        subscriber = _client.pubsub()
        subscriber.psubscribe(CHANNELS + "*")
        for message in subscriber.listen():
            if message["type"] == "psubscribe":
                listening.set()
                continue
            waiter = waiting.pop(message["channel"].decode().removeprefix(CHANNELS), None)
            if waiter is not None:
                waiter.set(json.loads(message["data"]))
    reader = []

    @app.post("/v1/chat/completions")
    def chat():
        if not reader:  # (the first request: the subscription is made and confirmed)
            reader.append(gevent.spawn(relay))
        listening.wait(10)
        body, job, waiter = request.get_json(), uuid.uuid4().hex, AsyncResult()
        waiting[job] = waiter
        with sending:  # (one held connection, one send at a time, as Switchboard's web sends tickets)
            if not producer:
                producer.append(kombu.Connection(**_broker).Producer())
            publish_task(producer[0], QUEUE, job, {"job": job, "body": {
                "messages": body["messages"], "max_tokens": body.get("max_tokens")}}, TASK)
        text = waiter.get(timeout=30)
        return jsonify({"id": f"chatcmpl-{job}", "object": "chat.completion", "created": int(time.time()),
                        "model": body["model"], "choices": [{"index": 0, "finish_reason": "stop", "message": {
                            "role": "assistant", "content": text}}]})
    return app


def start(stack: ExitStack, redis_url: str, upstream_port: int) -> tuple[int, list]:
    """Its web process and worker on `redis_url`: its port and processes.
    Ready once a reply came through the worker (see `ready`)."""
    from scripts.processes import BIN, Process, free_port, stack_env

    env = stack_env(redis_url, FLOOR_UPSTREAM_PORT=str(upstream_port))
    worker = Process("floor-worker", [str(BIN / "celery"), "-A", "scripts.benchkit.design_floor", "worker", "-P",
                                      "gevent", "-c", "100", "-Q", QUEUE, "--without-heartbeat", "--without-mingle",
                                      "--without-gossip", "-l", "warning"], env)
    stack.callback(worker.stop)
    port = free_port()
    web_process = Process("floor-web", [str(BIN / "gunicorn"), "-c", "/dev/null", "-k", "gevent", "-w", "1", "-b",
                                        f"127.0.0.1:{port}", "--worker-connections", "1000",
                                        "scripts.benchkit.design_floor:web()"], env)
    stack.callback(web_process.stop)
    return port, [web_process, worker]


def ready(port: int, processes: list, timeout: float = 60) -> None:
    """Until a chat request is answered through the worker."""
    import httpx

    deadline = time.monotonic() + timeout
    while True:
        for process in processes:
            process.check_alive()
        try:
            if httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", timeout=5, json={
                    "model": "floor", "messages": [{"role": "user", "content": "hi"}]}).is_success:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("the design floor did not answer:\n" + "".join(p.output()[-2000:] for p in processes))
        time.sleep(0.2)
