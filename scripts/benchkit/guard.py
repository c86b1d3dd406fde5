"""16. What the guard costs (secrets kept from hosted models).

a. The scan of one turn, in the worker's own code (workers/secrets_guard.py
   on a real Redis): a Claude Code-sized conversation (its own first
   request's system prompt and tools, then 40 messages of about 100 KB: its
   file reads of this project's source, one of them a project's .env) sent
   (1) with nothing of it scanned before, (2) as the next turn of a
   conversation whose earlier messages were scanned (two new messages), (3)
   the same in another worker process (the findings read from Redis), and
   the reply's restoring.
b. End to end: the same Switchboard with the guard off and on (redact), an
   upstream on the instant fake server, measured in pairs at the same
   moments (section 12's way, scripts/benchkit/tracing.py): Claude Code's
   first request, and the 100 KB turn holding secrets.
"""
from __future__ import annotations

import json
import time
from contextlib import ExitStack

from catalog.registry import parse_entry
from protocol.contract import Job, Message, ToolCall
from scripts.benchkit import tracing
from scripts.benchkit.stats import percentile
from scripts.embedded_redis import free_port, on_a_redis_of_its_own
from scripts.processes import ROOT, start_fake_upstream
from workers.model_output import Outcome
from workers.secrets_guard import Guards

FIXTURE = ROOT / "tests" / "fixtures" / "claude-code-messages-request.json"
SOURCES = sorted((ROOT / "workers").rglob("*.py")) + sorted((ROOT / "app").rglob("*.py"))
HOSTED = parse_entry("hosted", {"backend": "openai", "base_url": "https://api.example.com/v1",
                                "upstream_model": "m", "context_length": 200000})
MESSAGES, SIZE = 40, 100_000
PAIRS = (("on", "off"), ("off, again", "off"))


def reads(messages: int = MESSAGES, size: int = SIZE) -> list[tuple[str, str]]:
    """(path, text) of the files an agent read in a conversation of `messages` messages (half of them tool
    results) and about `size` characters; the fifth is the project's .env."""
    from tests.guard_secrets import ENV_FILE as env
    each = size // (messages // 2)
    texts = ((path, path.read_text()) for path in SOURCES)
    files = [(str(path.relative_to(ROOT)), text[:each]) for path, text in texts if len(text) >= each][:messages // 2]
    files[4] = ("/srv/app/.env", env)
    return files


def job_of(person: str, files: list[tuple[str, str]]) -> Job:
    """The conversation as the worker gets it: each read a call and its result."""
    messages = [Message(role="system", content=json.loads(FIXTURE.read_text())["body"]["system"][-1]["text"])]
    for i, (path, text) in enumerate(files):
        call = ToolCall(id=f"c{i}", name="Read", arguments=json.dumps({"file_path": path}))
        messages += [Message(role="assistant", content=f"Reading {path}.", tool_calls=[call]),
                     Message(role="tool", tool_call_id=f"c{i}", content=text)]
    return Job(id="bench", model="hosted", usage_of=person, messages=messages)


def _timed(action) -> float:
    started = time.perf_counter()
    action()
    return (time.perf_counter() - started) * 1000


def scan_costs(runs: int) -> dict:
    """Milliseconds of the guard's step per turn, each way (p50, p90)."""
    return on_a_redis_of_its_own(lambda redis: _scan_costs(Guards(redis, b"bench office secret"), runs))


def _scan_costs(guards: Guards, runs: int) -> dict:
    files = reads()
    ways: dict[str, list[float]] = {"nothing scanned before": [], "earlier messages scanned": [],
                                    "earlier messages scanned, another worker": [], "restoring a reply": []}
    for run in range(runs):
        person = f"person-{run}"
        guards.texts.clear()
        ways["nothing scanned before"].append(_timed(lambda: guards.for_job(
            job_of(person, files), HOSTED).outbound(job_of(person, files))))
        person = f"again-{run}"
        guards.for_job(job_of(person, files[:-1]), HOSTED).outbound(job_of(person, files[:-1]))
        turn = job_of(person, files)
        guard = guards.for_job(turn, HOSTED)
        ways["earlier messages scanned"].append(_timed(lambda: guard.outbound(turn)))
        guards.texts.clear()
        ways["earlier messages scanned, another worker"].append(_timed(
            lambda: guards.for_job(turn, HOSTED).outbound(turn)))
        reply = guard.outbound(turn).messages[10].content  # the .env's result, as a model would repeat it
        ways["restoring a reply"].append(_timed(lambda: list(guard.restored(_pieces(reply)))))
    conversation = job_of("x", files).messages
    return {"runs": runs, "messages": len(conversation),
            "characters": sum(len(m.content) + sum(len(c.arguments) for c in m.tool_calls) for m in conversation),
            "ways": {way: {"p50_ms": round(percentile(t, 0.5), 3), "p90_ms": round(percentile(t, 0.9), 3)}
                     for way, t in ways.items()}}


def _pieces(text: str):
    for at in range(0, len(text), 16):  # as an upstream streams it: a few tokens a piece
        yield text[at:at + 16]
    return Outcome("stop", 1, 1)


def _turn_body() -> dict:
    """The 100 KB turn in Anthropic's shape: Claude Code's request with the reads as its messages."""
    body = json.loads(FIXTURE.read_text())["body"] | {"model": "up", "stream": True, "max_tokens": 64}
    messages = [body["messages"][0]]
    for i, (path, text) in enumerate(reads()):
        messages += [{"role": "assistant", "content": [{"type": "tool_use", "id": f"t{i}", "name": "Read",
                                                        "input": {"file_path": path}}]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": text}]}]
    return body | {"messages": messages}


def measure(runs: int, requests: int, rounds: int, log=print) -> dict:
    log("16. guard: the scan of one turn")
    result = {"scan": scan_costs(runs)}
    log("16. guard: off and on, end to end")
    workloads = {"claude code turn": tracing.WORKLOADS["claude code turn"],
                 "100 KB turn with secrets": ("/v1/messages", _turn_body())}
    trees = [("off", ROOT, {}), ("off, again", ROOT, {}), ("on", ROOT, {"SWITCHBOARD_GUARD": "redact"})]
    upstream_port = free_port()
    with ExitStack() as exit:
        exit.callback(start_fake_upstream(upstream_port, tokens=32).stop)
        result |= tracing.compare(trees, PAIRS, workloads, f"http://127.0.0.1:{upstream_port}", (requests, rounds),
                                  lambda r: log(f"guard: round {r} of {rounds}"))
    return result | {"requests": requests, "rounds": rounds}


def lines(section: dict) -> list[str]:
    env, scan = section.get("environment"), section["scan"]
    found = [f"Run {env['date']} with `{env['command']}` on {env['cpu']} ({env['cores']} cores)." if env else "",
             f"a. The guard's step on one turn of {scan['messages']} messages ({scan['characters']:,} characters: "
             f"Claude Code's system prompt, then its reads of this project's files, one a .env), {scan['runs']} "
             "runs each:", "", "| turn | p50 | p90 |", "|---|---|---|"]
    found += [f"| {way} | {w['p50_ms']:.2f} ms | {w['p90_ms']:.2f} ms |" for way, w in scan["ways"].items()]
    found += ["", f"b. End to end, the guard off and on (redact), {section['requests']} requests at one client and "
              f"{section['requests'] * 4} at 16 per stack, pair and round, {section['rounds']} rounds (as section 12 "
              "measures):"]
    for workload, rows in section["workloads"].items():
        found += ["", f"**{workload}**", "", "| guard | one client p50 | 16 clients p50 | CPU per request |",
                  "|---|---|---|---|"]
        found += [f"| {name} | {r['one_client_ms_p50']:.2f} ms | {r['loaded_ms_p50']:.2f} ms | "
                  f"{r['cpu_ms_per_request']:.3f} ms |" for name, r in rows.items()]
        costs = section["costs"][workload]
        found += ["", "| cost | one client (p50) | 16 clients (p50) | CPU |", "|---|---|---|---|"]
        found += [f"| {pair} | " + " | ".join(f"{c[m]['median']:+.1%}" for m in ("one_client_p50", "loaded_p50",
                                                                                 "cpu")) + " |"
                  for pair, c in costs.items()]
    return found
