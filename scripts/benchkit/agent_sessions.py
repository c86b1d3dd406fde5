"""14. Agent sessions (issue 44): eight people, each with one coding agent's
session, on an upstream of fixed capacity (UPSTREAM) or on the local model
(LOCAL), while one of them floods.

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
On the local model (smollm2 in an 8,192-token context per sequence, 4
sequences, a RAM prompt cache) the same traffic is scaled down to fit: a
shorter system prompt, results and replies. Its work and cache reads are
what the replies' usage says (a turn's prompt tokens not read from a cache,
its reply; of what the session's turn before sent and got back, the share
read from a cache).

Per policy (FIFO; fair shares by work, this tree; `before`, an older tree),
with the flood and without it, on stacks started anew: the other people's
main turns' time to first token, each person's share of the model's work
(the tokens it read, not from a cache, and wrote: what shares by work
charge), and the share of the sessions' prompt tokens read from a cache
after their first turn.
"""
from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from scripts.benchkit.client import StreamResult, stream
from scripts.benchkit.sharing import _Stack
from scripts.benchkit.stats import percentile, summary
from scripts.embedded_redis import free_port
from scripts.processes import ROOT, commit_of, start_fake_upstream, wait_http_ready

FIXTURE = ROOT / "tests" / "fixtures" / "claude-code-messages-request.json"
RATE, CAPACITY, CACHE = 20_000, 2, 24  # the upstream servers'
KEYS = {f"p{n}": f"p{n}-bench-key" for n in range(8)}


@dataclass(frozen=True)
class Setup:
    """Where the sessions run, and the sizes of their traffic there (words;
    a reply in tokens; a side call summarises a page of `summary` words)."""
    name: str
    system: int
    result: int
    reply: int
    summary: int


UPSTREAM = Setup("upstream", system=10_000, result=1_000, reply=32, summary=3_000)
LOCAL = Setup("local", system=600, result=40, reply=8, summary=300)
LOCAL_REGISTRY = ('[models."agent"]\nbackend = "llamacpp"\npool = "local"\nn_ctx = 8192\nparallel = 4\n'
                  'prompt_cache_mb = 2048\naliases = ["claude-*haiku*"]\n')


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
    setup: Setup
    system: list[dict]
    ttft: dict[str, list[float]] = field(default_factory=dict)
    took: dict[str, float] = field(default_factory=dict)
    requests: int = 0
    failed: int = 0
    done: bool = False
    flooding: asyncio.Event = field(default_factory=asyncio.Event)
    work: dict[str, dict[str, int]] = field(default_factory=dict)  # as _work's, from the replies' usage
    _sent_before: dict[str, int] = field(default_factory=dict)

    async def send(self, person: str, session: str, body: dict):
        result = await stream(self.port, "/v1/messages", body, {
            "x-api-key": KEYS[person], "anthropic-version": "2023-06-01", "X-Claude-Code-Session-Id": session})
        self.requests += 1
        ok = result.status == 200 and not result.error
        self.failed += not ok
        if ok:
            self.tally(session, result)
        return result if ok else None

    def tally(self, session: str, result: StreamResult) -> None:
        """The work the reply's usage reports, per session ("p1/main"; its first turn "p1/main#first"): tokens
        read (not from a cache), read from it, that could have been (what its turn before sent and got back),
        written, requests. (The local model's run: no upstream counts them.)"""
        usage = result.usage
        cached, written = usage.get("cache_read_input_tokens") or 0, usage.get("output_tokens") or 0
        read = (usage.get("input_tokens") or 0) + (usage.get("cache_creation_input_tokens") or 0)
        tag = session.replace("-", "/", 1) + ("" if session in self._sent_before else "#first")
        work = self.work.setdefault(tag, {"read": 0, "cached": 0, "cacheable": 0, "written": 0, "requests": 0})
        work["read"] += read
        work["cached"] += cached
        work["cacheable"] += self._sent_before.get(session, 0)
        work["written"] += written
        work["requests"] += 1
        self._sent_before[session] = read + cached + written


def system_prompt(length: int) -> list[dict]:
    """The capture's system blocks (its billing line, which Switchboard drops,
    and its agent line), then its other text and its tools' schemas repeated
    or cut to `length` words."""
    body = json.loads(FIXTURE.read_text())["body"]
    blocks = body["system"]
    words = " ".join([*(b["text"] for b in blocks[2:]), json.dumps(body["tools"])]).split()
    padded = " ".join((words * (length // len(words) + 1))[:length])
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
        user = {"role": "user",
                "content": f"{person}/{name} turn {turn}: " + " ".join(["result"] * traffic.setup.result)}
        result = await traffic.send(person, f"{person}-{name}", {
            "model": "agent", "max_tokens": traffic.setup.reply, "stream": True, "temperature": 0,
            "system": traffic.system, "messages": history + [user]})
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
        for model, words, tokens in (("claude-haiku-4-5", traffic.setup.summary, traffic.setup.reply),
                                     ("agent", 2, 1)):
            text = f"p0/side{lane} call {n}: " + " ".join(["page"] * words)
            await traffic.send("p0", f"p0-side{lane}-{n}", {"model": model, "max_tokens": tokens, "stream": True,
                                                             "messages": [{"role": "user", "content": text}]})
            n += 1


async def _main(traffic: Traffic, person: str, turns: int) -> None:
    await traffic.flooding.wait()
    started = time.monotonic()
    await _session(traffic, person, "main", turns)
    traffic.took[person] = time.monotonic() - started


async def _traffic(port: int, setup: Setup, shape: Shape, flood: bool) -> Traffic:
    """The main sessions (once the flood is under way, if there is one, else once a first turn of p0's warmed
    the system prompt, as the flood's first turns do), and the flood until they end."""
    traffic = Traffic(port, setup, system_prompt(setup.system))
    if not flood:
        await _session(traffic, "p0", "warmup", 1)
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


def _one(tree: Path, policy: str, setup: Setup, shape: Shape, flood: bool) -> dict:
    """One run on a new stack (and new upstreams): the others' first tokens (seconds), shares, cache hits."""
    env = {"SWITCHBOARD_MAX_CONCURRENT": "64", "SWITCHBOARD_REQUESTS_PER_MINUTE": "1000000",
           "SWITCHBOARD_API_KEYS": ",".join(f"{p}:{k}" for p, k in KEYS.items())}
    env |= {"SWITCHBOARD_QUEUE_POLICY": "fifo"} if policy == "fifo" else {}
    run = _on_upstream if setup.name == "upstream" else _on_local
    return _summarise(*run(tree, setup, shape, flood, env))


def _on_upstream(tree: Path, setup: Setup, shape: Shape, flood: bool, env: dict) -> tuple[Traffic, dict, float]:
    ports = [free_port() for _ in range(2)]
    urls = [f"http://127.0.0.1:{port}" for port in ports]
    with ExitStack() as exit:
        servers = [start_fake_upstream(port, tokens=setup.reply, rate=RATE, capacity=CAPACITY, wait=False,
                                       extra=("--cache", str(CACHE))) for port in ports]
        for server, url in zip(servers, urls):
            exit.callback(server.stop)
            wait_http_ready(server, f"{url}/v1/models")
        with _Stack(_registry(urls), [(32, "upstream-completion,upstream", "gevent")], tree=tree, **env) as stack:
            started = time.monotonic()
            traffic = asyncio.run(_traffic(stack.port, setup, shape, flood))
            seconds = time.monotonic() - started
        return traffic, _work(urls), seconds


def _on_local(tree: Path, setup: Setup, shape: Shape, flood: bool, env: dict) -> tuple[Traffic, dict, float]:
    with _Stack(LOCAL_REGISTRY, [(4, "local-completion,local", "threads")], tree=tree, **env) as stack:
        started = time.monotonic()
        traffic = asyncio.run(_traffic(stack.port, setup, shape, flood))
        seconds = time.monotonic() - started
        return traffic, traffic.work, seconds


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


def measure(setup: Setup, shape: Shape, rounds: int, before: Path | None, log=print) -> dict:
    policies = {"fifo": ROOT, "by work": ROOT} | ({"before": before} if before else {})
    found: dict = {name: {"flood": [], "alone": []} for name in policies}
    for round_ in range(rounds):
        for name, tree in policies.items():
            for flood in ((False, True) if round_ % 2 == 0 else (True, False)):  # (in turns)
                found[name]["flood" if flood else "alone"].append(_one(tree, name, setup, shape, flood))
            log(f"agent sessions ({setup.name}): round {round_ + 1} of {rounds}, {name}")
    return {"setup": setup.name, "rounds": rounds, "shape": shape.__dict__,
            "before": commit_of(before) if before else None, "system_words": setup.system,
            "result_words": setup.result, "reply": setup.reply, "rate": RATE, "capacity": CAPACITY, "cache": CACHE,
            "policies": {name: _pooled(runs) for name, runs in found.items()}}


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
