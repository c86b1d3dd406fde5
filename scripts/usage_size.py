"""What a year of usage costs Redis: `python scripts/usage_size.py [--people
200] [--models 3] [--days 365]`. On a Redis of its own (the virtualenv's),
fills a year of days for that many people, each using every model every day
with every counter set to a random amount (the worst case for compression),
runs the maintenance step (which folds every day but the last two), and prints Redis's
own bytes per day as a hash and folded, and for the whole year."""
from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ledger import usage  # noqa: E402
from scripts.embedded_redis import on_a_redis_of_its_own  # noqa: E402
from protocol.keys import usage_folded_key, usage_key  # noqa: E402


def fill(client, day: str, people: int, models: int, rng: random.Random) -> None:
    with client.pipeline(transaction=False) as pipe:
        for person in range(people):
            for model in range(models):
                for metric in usage.METRICS:
                    pipe.hset(usage_key(day), usage.SEPARATOR.join((f"person-{person:03d}", f"model-{model}", metric)),
                              rng.randint(1, 2_000_000))
        pipe.expire(usage_key(day), usage.KEEP_DAYS * 86400)
        pipe.execute()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--people", type=int, default=200)
    parser.add_argument("--models", type=int, default=3)
    parser.add_argument("--days", type=int, default=365)
    options = parser.parse_args(argv)
    print(on_a_redis_of_its_own(lambda client: measure(client, options.people, options.models, options.days)))


def measure(client, people: int, models: int, days_kept: int) -> str:
    rng = random.Random(42)
    days = [usage._days_ago(n) for n in range(days_kept)]
    for day in days:
        fill(client, day, people, models, rng)
    as_hash = client.memory_usage(usage_key(days[-1]), samples=0)
    usage.fold_old_days(client)
    folded = [client.memory_usage(usage_folded_key(day), samples=0) or 0 for day in days[2:]]
    total = sum(folded) + sum(client.memory_usage(usage_key(day), samples=0) for day in days[:2])
    return (f"{people} people x {models} models, {len(usage.METRICS)} counters each: a day is {as_hash:,} bytes as "
            f"a hash, {sum(folded) // len(folded):,} folded; {days_kept} days: {total:,} bytes")


if __name__ == "__main__":
    main()
