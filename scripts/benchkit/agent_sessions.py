"""14. Agent sessions (issue 44): eight people, each with one coding agent's
session, on an upstream of fixed capacity, while one of them floods.

The traffic replays the shape of Claude Code's requests (tests/fixtures'
capture): every turn resends a long system prompt (the capture's, with its
24 tools' schemas, repeated to Claude Code's ~10,000 words) and the growing
history: each turn adds a tool result of RESULT words and a reply. Person p0
also floods: SUBAGENTS subagent sessions of their own at once (new ones as
they end), and side calls nobody waits for (summaries on Claude Code's
small-model name, `claude-haiku-*`, and one-token quota probes).

The upstream is two servers (the benchmark's own, model "work", RATE tokens
a second per request, each answering CAPACITY requests at once and keeping a
prefix cache of CACHE conversations): Switchboard routes the model over both.
Per policy (FIFO; fair shares by work, this tree; `before`, an older tree
whose fair shares count requests), with the flood and without it, on stacks
started anew: the other people's main turns' time to first token, each
person's share of the upstream's work (the tokens it read, not from a cache,
and wrote: what shares by work charge), and the share of the sessions'
prompt tokens read from a cache after their first turn.
"""
from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from scripts.benchkit.client import stream
from scripts.benchkit.sharing import _Stack
from scripts.benchkit.stats import percentile, summary
from scripts.embedded_redis import free_port
from scripts.processes import ROOT, commit_of, start_fake_upstream, wait_http_ready

FIXTURE = ROOT / "tests" / "fixtures" / "claude-code-messages-request.json"
SYSTEM_WORDS, RESULT, REPLY = 10_000, 1_000, 32
SUMMARY_WORDS = 3_000  # a side call: a fetched page to summarise
RATE, CAPACITY, CACHE = 20_000, 2, 24
KEYS = {f"p{n}": f"p{n}-bench-key" for n in range(8)}


@dataclass(frozen=True)
class Shape:
    people: int = 8
    turns: int = 20
    subagents: int = 8
    sub_turns: int = 10
    side_lanes: int = 2


@dataclass
class Traffic:
    """One run's traffic: the stack's port, the agents' system prompt, and
    what it saw (per person, the main turns' first tokens after a session's
    first turn, and how long the main session took; requests, failures).
    `flooding` is set once the flood's first requests were answered (the
    main sessions start then), `done` once every main session ended."""
    port: int
    system: list[dict]
    ttft: dict[str, list[float]] = field(default_factory=dict)
    took: dict[str, float] = field(default_factory=dict)
    requests: int = 0
    failed: int = 0
    done: bool = False
    flooding: asyncio.Event = field(default_factory=asyncio.Event)

    async def send(self, person: str, session: str, body: dict):
        result = await stream(self.port, "/v1/messages", body, {
            "x-api-key": KEYS[person], "anthropic-version": "2023-06-01", "X-Claude-Code-Session-Id": session})
        self.requests += 1
        ok = result.status == 200 and not result.error
        self.failed += not ok
        return result if ok else None


def system_prompt() -> list[dict]:
    """The capture's system blocks (its billing line, which Switchboard drops,
    and its agent line), then its other text and its tools' schemas repeated
    to SYSTEM_WORDS words."""
    body = json.loads(FIXTURE.read_text())["body"]
    blocks = body["system"]
    words = " ".join([*(b["text"] for b in blocks[2:]), json.dumps(body["tools"])]).split()
    padded = " ".join((words * (SYSTEM_WORDS // len(words) + 1))[:SYSTEM_WORDS])
    return [*blocks[:2], {"type": "text", "text": padded}]


def _registry(upstreams: list[str]) -> str:
    places = ", ".join(f'{{ base_url = "{url}/v1", max_concurrent = {CAPACITY} }}' for url in upstreams)
    return ('[models."agent"]\nbackend = "openai"\nupstream_model = "work"\ncontext_length = 131072\n'
            f'aliases = ["claude-*haiku*"]\ndeployments = [{places}]\n')


async def _session(traffic: Traffic, person: str, name: str, turns: int) -> None:
    """One agent session of `turns` turns, each resending the whole history
    (a flood's session stops once the main sessions ended)."""
    history: list[dict] = []
    for turn in range(turns):
        if traffic.done and name != "main":
            return
        user = {"role": "user", "content": f"{person}/{name} turn {turn}: " + " ".join(["result"] * RESULT)}
        result = await traffic.send(person, f"{person}-{name}", {
            "model": "agent", "max_tokens": REPLY, "stream": True, "system": traffic.system,
            "messages": history + [user]})
        if result is None:
            return
        if name == "main" and turn and result.ttft is not None:  # (a first turn reads the system prompt cold)
            traffic.ttft.setdefault(person, []).append(result.ttft)
        elif name != "main" and not traffic.flooding.is_set():
            traffic.flooding.set()
        history += [user, {"role": "assistant", "content": result.text}]


async def _subagents(traffic: Traffic, shape: Shape) -> None:
    async def lane(n: int) -> None:
        round_ = 0
        while not traffic.done:
            await _session(traffic, "p0", f"sub{n}.{round_}", shape.sub_turns)
            round_ += 1
    await asyncio.gather(*(lane(n) for n in range(shape.subagents)))


async def _side_calls(traffic: Traffic, lane: int) -> None:
    """Summaries on the small model's name, then a quota probe, back to back."""
    n = 0
    while not traffic.done:
        for model, words, tokens in (("claude-haiku-4-5", SUMMARY_WORDS, REPLY), ("agent", 2, 1)):
            text = f"p0/side{lane} call {n}: " + " ".join(["page"] * words)
            await traffic.send("p0", f"p0-side{lane}-{n}", {"model": model, "max_tokens": tokens, "stream": True,
                                                             "messages": [{"role": "user", "content": text}]})
            n += 1


async def _main(traffic: Traffic, person: str, turns: int) -> None:
    await traffic.flooding.wait()
    started = time.monotonic()
    await _session(traffic, person, "main", turns)
    traffic.took[person] = time.monotonic() - started


async def _traffic(port: int, shape: Shape, flood: bool) -> Traffic:
    """The main sessions (once the flood is under way, if there is one), and the flood until they end."""
    traffic = Traffic(port, system_prompt())
    if not flood:
        traffic.flooding.set()

    async def mains() -> None:
        await asyncio.gather(*(_main(traffic, f"p{n}", shape.turns) for n in range(shape.people)))
        traffic.done = True
    flooding = [_subagents(traffic, shape), *(_side_calls(traffic, n) for n in range(shape.side_lanes))] \
        if flood else []
    await asyncio.gather(mains(), *flooding)
    return traffic


def _work(urls: list[str]) -> dict[str, dict[str, int]]:
    """Per tag, summed over the upstreams: tokens read, from the cache, written, requests."""
    found: dict[str, dict[str, int]] = {}
    for url in urls:
        with urllib.request.urlopen(f"{url}/stats", timeout=10) as reply:
            for tag, counts in json.loads(reply.read())["work"].items():
                into = found.setdefault(tag, {})
                for name, value in counts.items():
                    into[name] = into.get(name, 0) + value
    return found


def _one(tree: Path, policy: str, shape: Shape, flood: bool) -> dict:
    """One run on a new stack and new upstreams: the others' first tokens (seconds), shares, cache hits."""
    ports = [free_port() for _ in range(2)]
    urls = [f"http://127.0.0.1:{port}" for port in ports]
    with ExitStack() as exit:
        servers = [start_fake_upstream(port, tokens=REPLY, rate=RATE, capacity=CAPACITY, wait=False,
                                       extra=("--cache", str(CACHE))) for port in ports]
        for server, url in zip(servers, urls):
            exit.callback(server.stop)
            wait_http_ready(server, f"{url}/v1/models")
        env = {"SWITCHBOARD_QUEUE_POLICY": "fifo"} if policy == "fifo" else {}
        with _Stack(_registry(urls), [(32, "upstream-completion,upstream", "gevent")], tree=tree,
                    SWITCHBOARD_MAX_CONCURRENT="64", SWITCHBOARD_REQUESTS_PER_MINUTE="1000000",
                    SWITCHBOARD_API_KEYS=",".join(f"{p}:{k}" for p, k in KEYS.items()), **env) as stack:
            started = time.monotonic()
            traffic = asyncio.run(_traffic(stack.port, shape, flood))
            seconds = time.monotonic() - started
        work = _work(urls)
    return _summarise(traffic, work, seconds)


def _summarise(traffic: Traffic, work: dict, seconds: float) -> dict:
    per_person: dict[str, int] = {}
    for tag, counts in work.items():
        person = tag.split("/")[0]
        per_person[person] = per_person.get(person, 0) + counts["read"] + counts["written"]
    total = sum(per_person.values()) or 1
    # the sessions' turns after their first: of what the turn before sent (all but the new message), how
    # much was read from a cache
    later = [c for t, c in work.items() if ("/main" in t or "/sub" in t) and not t.endswith("#first")]
    cacheable = sum(c["cacheable"] for c in later)
    others = [t for person, ts in traffic.ttft.items() if person != "p0" for t in ts]
    return {"seconds": round(seconds, 1), "requests": traffic.requests, "failed": traffic.failed,
            "others_ttft": others, "p0_ttft_ms": summary(traffic.ttft.get("p0", [])),
            "others_took_s": round(percentile([s for p, s in traffic.took.items() if p != "p0"], 0.5), 2),
            "shares": {p: round(w / total, 3) for p, w in sorted(per_person.items())},
            "cache_hit": round(sum(c["cached"] for c in later) / (cacheable or 1), 3)}


def measure(shape: Shape, rounds: int, before: Path | None, log=print) -> dict:
    policies = {"fifo": ROOT, "by work": ROOT} | ({"before": before} if before else {})
    found: dict = {name: {"flood": [], "alone": []} for name in policies}
    for round_ in range(rounds):
        for name, tree in policies.items():
            for flood in ((False, True) if round_ % 2 == 0 else (True, False)):  # (in turns)
                found[name]["flood" if flood else "alone"].append(_one(tree, name, shape, flood))
            log(f"agent sessions: round {round_ + 1} of {rounds}, {name}")
    return {"rounds": rounds, "shape": shape.__dict__, "before": commit_of(before) if before else None,
            "system_words": SYSTEM_WORDS, "result_words": RESULT, "reply": REPLY, "rate": RATE,
            "capacity": CAPACITY, "cache": CACHE, "policies": {name: _pooled(runs) for name, runs in found.items()}}


def _pooled(runs: dict) -> dict:
    """The others' first tokens pooled over the rounds (their ratio flood / alone at p50 and p99); medians
    over rounds of the rest."""
    out = {}
    for key, listed in runs.items():
        out[key] = {"failed": sum(r["failed"] for r in listed), "requests": sum(r["requests"] for r in listed),
                    "seconds": percentile([r["seconds"] for r in listed], 0.5),
                    "others_ttft_ms": summary([t for r in listed for t in r["others_ttft"]]),
                    "others_ttft_p50_rounds": [round(percentile(r["others_ttft"], 0.5) * 1000) for r in listed],
                    "shares": {p: percentile([r["shares"].get(p, 0) for r in listed], 0.5)
                               for p in listed[0]["shares"]},
                    "cache_hit": percentile([r["cache_hit"] for r in listed], 0.5)}
    out["ttft_ratio"] = {q: round(out["flood"]["others_ttft_ms"][q] / max(out["alone"]["others_ttft_ms"][q], 1e-9), 2)
                         for q in ("p50", "p99")}
    return out
