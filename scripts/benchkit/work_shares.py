"""13. Shares by work (issue 44): what each person gets of a busy model when
their requests differ in size. Two people with equal weights on an upstream
of fixed capacity (the benchmark's own server, model "work": one request at a
time, each taking a time proportional to the tokens it reads and writes):
Alice's agent resends a long prompt every turn (AGENT_WORDS tokens), Bob
chats in short turns (CHAT_WORDS); each keeps LANES requests outstanding for
the whole window, so the fair queue always holds both. Per person: their
share of the model's work (the tokens it read and wrote for them), their
requests served, and Bob's time to first token. This tree (shares by work)
and `before` (an older tree: shares by requests) side by side, round after
round on stacks started anew, taking turns.
"""
from __future__ import annotations

import asyncio
import time
from contextlib import ExitStack
from pathlib import Path

from scripts.benchkit.client import stream
from scripts.benchkit.sharing import _Stack
from scripts.benchkit.stats import percentile, summary
from scripts.embedded_redis import free_port
from scripts.processes import ROOT, commit_of, start_fake_upstream

AGENT_WORDS, CHAT_WORDS, REPLY = 20_000, 500, 16
RATE = 40_000  # tokens a second the upstream reads or writes: Alice's turn 0.5 s, Bob's 13 ms
LANES = 4
KEYS = {"alice": "alice-bench-key", "bob": "bob-bench-key"}


def _stack(tree: Path, upstream: str) -> _Stack:
    """A Switchboard of the source tree whose model is the upstream's "work", one request at a time."""
    registry = ('[models."up"]\nbackend = "openai"\nupstream_model = "work"\ncontext_length = 131072\n'
                f'deployments = [{{ base_url = "{upstream}/v1", max_concurrent = 1 }}]\n')
    return _Stack(registry, [(16, "upstream-completion,upstream", "gevent")], tree=tree,
                  SWITCHBOARD_MAX_CONCURRENT="64", SWITCHBOARD_REQUESTS_PER_MINUTE="1000000",
                  SWITCHBOARD_API_KEYS=",".join(f"{name}:{key}" for name, key in KEYS.items()))


async def _lane(port: int, person: str, words: int, until: float, into: list) -> None:
    body = {"model": "up", "stream": True, "max_tokens": REPLY,
            "messages": [{"role": "user", "content": " ".join(["tok"] * words)}]}
    headers = {"Authorization": f"Bearer {KEYS[person]}"}
    while time.monotonic() < until:
        result = await stream(port, "/v1/chat/completions", body, headers)
        if result.status == 200 and time.monotonic() < until:  # (one still running at the end is not counted)
            into.append((person, words + REPLY, result.ttft))


async def _window(port: int, seconds: float) -> list:
    """Both people's lanes for `seconds`: (person, tokens of work, time to first token) per request served."""
    served: list = []
    until = time.monotonic() + seconds
    await asyncio.gather(*(_lane(port, person, words, until, served) for person, words in
                           (("alice", AGENT_WORDS), ("bob", CHAT_WORDS)) for _ in range(LANES)))
    return served


def measure(seconds: float, rounds: int, before: Path | None, log=print) -> dict:
    trees = {"by work": ROOT} | ({"before": before} if before else {})
    found: dict = {name: {"alice_share": [], "requests": {"alice": 0, "bob": 0}, "bob_ttft": []} for name in trees}
    port = free_port()
    with ExitStack() as exit:
        exit.callback(start_fake_upstream(port, tokens=REPLY, rate=RATE, capacity=1).stop)
        for round_ in range(rounds):
            for name, tree in (trees.items() if round_ % 2 == 0 else reversed(trees.items())):
                with _stack(tree, f"http://127.0.0.1:{port}") as stack:
                    asyncio.run(_window(stack.port, 2.0))  # warm-up
                    served = asyncio.run(_window(stack.port, seconds))
                work = {p: sum(t for who, t, _ in served if who == p) for p in ("alice", "bob")}
                found[name]["alice_share"].append(work["alice"] / max(sum(work.values()), 1))
                for person in work:
                    found[name]["requests"][person] += sum(1 for who, _, _ in served if who == person)
                found[name]["bob_ttft"] += [ttft for who, _, ttft in served if who == "bob" and ttft is not None]
            log(f"work shares: round {round_ + 1} of {rounds}")
    return {"seconds": seconds, "rounds": rounds, "before": commit_of(before) if before else None,
            "agent_words": AGENT_WORDS, "chat_words": CHAT_WORDS, "reply": REPLY, "rate": RATE, "lanes": LANES,
            "trees": {name: {"alice_share": round(percentile(f["alice_share"], 0.5), 3),
                             "alice_share_rounds": [round(s, 3) for s in f["alice_share"]],
                             "requests": f["requests"], "bob_ttft_ms": summary(f["bob_ttft"])}
                      for name, f in found.items()}}
