"""A Redis with an append-only file restarted (SIGTERM, as `docker compose
restart` or an upgrade does) in the middle of an office's load, through
real processes: every request got its answer or a clean, retryable error,
none hung; the usage counted equals what the clients were answered (so no
job whose client got an error ran for nobody, and none ran twice); stored
responses, budgets and everything counted before the restart are still
there; and nothing jobs held is left held."""
from __future__ import annotations

import time

import httpx
import pytest
import redis

from identity.keys import digest
from ledger import usage
from scripts.embedded_redis import EmbeddedRedis
from scripts.processes import stack_env, start_stack
from scripts.redis_servers import debian_redis
from tests.integration.office_load import OfficeLoad, held_places
from tests.integration.waits import queued, wait_until

PEOPLE = {"alice": "alice-key-1", "bob": "bob-key-2", "carol": "carol-key-3", "dan": "dan-key-4"}
BUDGETED = ("erin", "erin-key-5")  # daily_tokens 40: two 10-word chats


def keys_file(path):
    lines = [f'[keys.{name}]\nsha256 = "{digest(key)}"\nmax_concurrent = 1\n' for name, key in PEOPLE.items()]
    lines.append(f'[keys.{BUDGETED[0]}]\nsha256 = "{digest(BUDGETED[1])}"\ndaily_tokens = 40\n')
    lines.append(f'[keys.root]\nsha256 = "{digest("root-key")}"\nadmin = true\n')
    path.write_text("\n".join(lines))
    return path


@pytest.fixture
def office(tmp_path):
    server = EmbeddedRedis(data_dir=tmp_path / "redis", binary=debian_redis())
    env = stack_env(server.url, SWITCHBOARD_KEYS_FILE=str(keys_file(tmp_path / "keys.toml")),
                    SWITCHBOARD_HEARTBEAT_TIMEOUT="3")
    worker, web, base = start_stack(env, concurrency=3)
    office = {"redis": server, "base": base, "dir": tmp_path / "redis"}
    yield office
    web.stop()
    worker.stop()
    office["redis"].stop()


def _restart(office) -> None:
    port = office["redis"].port
    office["redis"].stop()  # SIGTERM: Redis writes its append-only file and exits
    office["redis"] = EmbeddedRedis(port=port, data_dir=office["dir"], binary=debian_redis())


def answered_usage(client: redis.Redis, people: list[str]) -> dict[str, dict[str, int]]:
    """Per person, what usage counted as answered: requests that ended
    neither in an error nor an abort, and their tokens."""
    counted = usage.usage(client)
    found = {}
    for person in people:
        models = counted.get(person, {}).values()
        found[person] = {"requests": sum(m["requests"] - m["errors"] - m["aborts"] for m in models),
                         "prompt_tokens": sum(m["prompt_tokens"] for m in models),
                         "completion_tokens": sum(m["completion_tokens"] for m in models)}
    return found


def _chat(base: str, key: str, text: str) -> httpx.Response:
    return httpx.post(f"{base}/api/chat", headers={"Authorization": f"Bearer {key}"}, timeout=30,
                      json={"model": "echo", "stream": False, "messages": [{"role": "user", "content": text}]})


def test_a_restart_mid_load_loses_nothing_accepted_or_counted(office):
    base = office["base"]
    assert httpx.get(f"{base}/readyz").json()["redis"] == {"persistence": "aof"}
    words = " ".join(["w"] * 10)
    assert [_chat(base, BUDGETED[1], words).status_code for _ in range(3)] == [200, 200, 429]  # budget spent
    load = OfficeLoad(base, PEOPLE).start()
    try:
        wait_until(lambda: load.answered() >= 12, 60, "the office's first answers")
        client = redis.Redis.from_url(office["redis"].url)
        wait_until(queued(client, "local"), 30, "a job waiting in the queue")
        _restart(office)
        restarted = time.monotonic()
        wait_until(lambda: load.answered(after=restarted) >= 12, 90, "answers after the restart")
    finally:
        load.stop()
    assert not load.unclean, load.unclean
    failed = [o for o in load.outcomes if not o.answered]
    assert all(o.detail.startswith(("503", "in band")) for o in failed)
    client = redis.Redis.from_url(office["redis"].url)
    assert answered_usage(client, list(PEOPLE)) == load.totals()
    console = httpx.get(f"{base}/admin/status", headers={"Authorization": "Bearer root-key"}).json()
    assert {name: console["usage_today"]["by_person"][name]["completion_tokens"] for name in PEOPLE} == \
        {name: told["completion_tokens"] for name, told in load.totals().items()}  # the console's history too
    owners = {o.response_id: o.person for o in load.outcomes if o.response_id}
    for response_id, person in owners.items():
        stored = httpx.get(f"{base}/v1/responses/{response_id}", headers={"Authorization": f"Bearer {PEOPLE[person]}"})
        assert stored.status_code == 200, (response_id, stored.text)
    assert _chat(base, BUDGETED[1], "x").status_code == 429  # the budget spent before the restart still is
    wait_until(lambda: not held_places(client, list(PEOPLE), ["local"]), 30, "every slot and queue place to be free")
    print(f"{len(load.outcomes)} requests: {len(load.outcomes) - len(failed)} answered, {len(failed)} clean errors")
