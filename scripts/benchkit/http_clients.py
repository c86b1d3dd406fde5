"""What the upstream HTTP client costs a worker, side by side: the worker's
own client (workers/backends/http_pool.py, on http.client) against urllib3
and httpx, each doing what the worker does with a streamed upstream reply.

One process, gevent-patched as an upstream worker is, streams the same chat
completion from the benchmark's fake upstream through each client in turns;
each client's CPU time is added over its turns and divided by its requests.
Each client: POST with a kept-alive connection, the reply's lines as they
arrive (everything that arrived per read where the client allows it),
the connection given back. Section 8 of the same run gives the worker's
whole CPU per streamed request, which the difference is set against.
"""
from __future__ import annotations

import json
import os
import time
from typing import Callable, Iterator

PATH = "/v1/chat/completions"
HEADERS = {"Content-Type": "application/json", "Accept": "*/*", "User-Agent": "switchboard"}


def _body(tokens: int) -> bytes:
    return json.dumps({"model": "instant", "stream": True, "max_tokens": tokens,
                       "messages": [{"role": "user", "content": "Say something."}]}).encode()


def _lines(blocks: Iterator[bytes]) -> Iterator[list[str]]:
    """Lines split from whatever each read returned, as http_pool does."""
    left = b""
    for block in blocks:
        *complete, left = (left + block).split(b"\n")
        if complete:
            yield [line.decode("utf-8", errors="replace").rstrip("\r") for line in complete]


def ours(base: str) -> Callable[[bytes], int]:
    from workers.backends.http_pool import ConnectionPool
    pool = ConnectionPool(base, 10.0)

    def request(body: bytes) -> int:
        response = pool.post(PATH, body, HEADERS, 60.0, lambda shut_down: None)
        try:
            return sum(len(lines) for lines in response.arrivals(lambda: 60.0))
        finally:
            response.close()
    return request


def urllib3_client(base: str) -> Callable[[bytes], int]:
    import urllib3
    pool = urllib3.connection_from_url(base, maxsize=64, retries=False, timeout=urllib3.Timeout(connect=10, read=60))

    def request(body: bytes) -> int:
        response = pool.urlopen("POST", PATH, body=body, headers=HEADERS, preload_content=False, retries=False)
        try:
            return sum(len(lines) for lines in _lines(iter(lambda: response.read1(65536), b"")))
        finally:
            response.release_conn()
    return request


def httpx_client(base: str) -> Callable[[bytes], int]:
    import httpx
    client = httpx.Client(base_url=base, timeout=httpx.Timeout(60.0, connect=10.0))

    def request(body: bytes) -> int:
        with client.stream("POST", PATH, content=body, headers=HEADERS) as response:
            return sum(len(lines) for lines in _lines(response.iter_raw()))
    return request


CLIENTS = {"http.client (the worker's)": ours, "urllib3": urllib3_client, "httpx": httpx_client}


def measure(upstream_port: int, tokens: int, requests: int = 300, turns: int = 4) -> dict:
    """CPU ms a streamed request, per client: `turns` turns of `requests`
    requests each, after a warm-up. Run it in a gevent-patched process, as
    an upstream worker is (main does so first)."""
    base, body = f"http://127.0.0.1:{upstream_port}", _body(tokens)
    clients = {name: make(base) for name, make in CLIENTS.items()}
    cpu, lines = dict.fromkeys(clients, 0.0), {}
    for name, request in clients.items():
        lines[name] = request(body)  # connects, warms up
    for _ in range(turns):
        for name, request in clients.items():
            started = time.process_time()
            for _ in range(requests):
                request(body)
            cpu[name] += time.process_time() - started
    count = requests * turns
    return {"tokens": tokens, "requests": count, "lines": lines,
            "cpu_ms_per_request": {name: round(seconds * 1000 / count, 3) for name, seconds in cpu.items()}}


def main() -> None:
    """`python -m scripts.benchkit.http_clients`: the fake upstream on a free
    port, each client in turns, the result as JSON."""
    from gevent import monkey
    monkey.patch_all()
    import argparse
    import sys
    from contextlib import ExitStack

    from scripts.embedded_redis import free_port
    from scripts.processes import Process, wait_http_ready
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--requests", type=int, default=300)
    args = parser.parse_args()
    with ExitStack() as stack:
        port = free_port()
        upstream = Process("upstream", [sys.executable, "-m", "scripts.benchkit.upstream", "--port", str(port),
                                        "--tokens", str(args.tokens)], dict(os.environ))
        stack.callback(upstream.stop)
        wait_http_ready(upstream, f"http://127.0.0.1:{port}/v1/models")
        print(json.dumps(measure(port, args.tokens, args.requests), indent=1))


if __name__ == "__main__":
    main()
