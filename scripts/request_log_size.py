"""What the request log costs Redis: `python scripts/request_log_size.py
[--records 100000] [--people 200] [--per-day 20000]`. On a Redis of its own
(the virtualenv's), appends that many records as the web process writes
them (every field set, with random values: request, trace and session ids
of their real lengths), and prints Redis's own bytes per record and what
14 days (the default retention) of `--per-day` requests take."""
from __future__ import annotations

import argparse
import random
import sys
import uuid
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ledger import request_log  # noqa: E402
from protocol import keys  # noqa: E402
from scripts.embedded_redis import on_a_redis_of_its_own  # noqa: E402

MODELS = ("smollm2:135m", "qwen2.5-coder:7b", "claude-sonnet-4-5")
ROUTES = ("/v1/chat/completions", "/v1/messages", "/v1/responses", "/api/chat")


def record(rng: random.Random, people: int) -> dict:
    model = rng.choice(MODELS)
    return {"request": uuid.uuid4().hex, "person": f"person-{rng.randrange(people):03d}", "model": model,
            "answered": model, "dialect": "openai", "route": rng.choice(ROUTES), "transport": "http",
            "status": rng.choice((200,) * 19 + (429,)), "finish": rng.choice(("stop", "tool_calls", "length")),
            "tokens_in": rng.randint(200, 60_000), "tokens_out": rng.randint(1, 2_000),
            "cached": rng.randint(0, 50_000), "queue_ms": rng.uniform(0, 5_000), "ttft_ms": rng.uniform(5, 9_000),
            "total_ms": rng.uniform(50, 90_000), "tool_rounds": rng.randint(0, 3), "server_tools": rng.randint(0, 3),
            "tool_calls": rng.randint(0, 4), "trace": uuid.uuid4().hex, "session": str(uuid.uuid4()), "error": None}


def measure(client, records: int, people: int, per_day: int) -> str:
    rng = random.Random(42)
    for start in range(0, records, 1000):
        with client.pipeline(transaction=False) as pipe:
            for _ in range(min(1000, records - start)):
                request_log.append(pipe, record(rng, people))
            request_log.trim(pipe, days=14, most=records)
            pipe.execute()
    used = client.memory_usage(keys.REQUEST_LOG, samples=0)
    each = used / client.xlen(keys.REQUEST_LOG)
    return (f"{client.xlen(keys.REQUEST_LOG):,} records: {used / 1e6:.1f} MB, {each:.0f} bytes a record; "
            f"14 days of {per_day:,} requests a day: {each * per_day * 14 / 1e6:.0f} MB; "
            f"the default cap (500,000 records): {each * 500_000 / 1e6:.0f} MB")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--people", type=int, default=200)
    parser.add_argument("--per-day", type=int, default=20_000)
    options = parser.parse_args(argv)
    print(on_a_redis_of_its_own(lambda client: measure(client, options.records, options.people, options.per_day)))


if __name__ == "__main__":
    main()
