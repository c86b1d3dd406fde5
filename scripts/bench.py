"""Benchmark Switchboard against direct access, LiteLLM's proxy and
llama-cpp-python's server, all started here on loopback and stopped at the
end; writes docs/benchmarks.md, docs/benchmarks.png and the raw numbers
(docs/benchmarks.json).

    python scripts/bench.py            # the full run (about 40 minutes on 2 cores)
    python scripts/bench.py --quick    # smaller sizes (about 18 minutes on 2 cores)
    python scripts/bench.py --scale    # section 8 only: web x worker configurations up to 256 clients
    python scripts/bench.py --deployments  # section 9 only: one model on 1, 2 and 4 servers
    python scripts/bench.py --durability   # section 10 only: Redis persistence's cost, a failover's pause
    python scripts/bench.py --codex-transport  # section 11 only: Codex's tool loop, HTTP against WebSocket
    python scripts/bench.py --tracing --before /tmp/old-tree  # section 12 only: tracing off, on, and before it
    python scripts/bench.py --work-shares --before /tmp/old-tree  # section 13 only: shares by work and before
    python scripts/bench.py --agent-sessions --before /tmp/old-tree  # section 14 only: agents while one floods
    python scripts/bench.py --agent-sessions-local --before /tmp/old-tree  # 14b: the same on the local model
    python scripts/bench.py --guard        # section 16 only: the guard's scan of a turn, and off against on
    python scripts/bench.py --long-jobs --before /tmp/old-tree  # 17: short turns beside four long local jobs
    python scripts/bench.py --office-load --before /tmp/old-tree  # 18: an office's load, against LiteLLM
    python scripts/bench.py --scale --configs 1+1,2+2,4+4,8+4 --before /tmp/old-tree

Needs `make install-dev` (it builds .venv with the bench tools and LiteLLM's .venv-litellm).
"""
from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import platform
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts.benchkit import (abort, agent_sessions, celery_floor, codex_transport, deployments,  # noqa: E402
                              durability, guard, local_batching, local_model, long_jobs, mcp_gateway, office_load,
                              overhead, profile, relay, scale, sharing, tracing, work_shares)
from scripts.benchkit.report import chart, markdown  # noqa: E402
from scripts.benchkit.stack import BenchStack, redis_connection_bound  # noqa: E402
from scripts.benchkit.targets import check_all  # noqa: E402
from scripts.children import stop_all, stop_on_signals  # noqa: E402


@dataclass(frozen=True)
class Sizes:
    upstream_tokens: int = 32
    upstream_rate: float = 200.0
    levels: tuple[int, ...] = (1, 16, 64)
    route_levels: tuple[int, ...] = (1, 64)  # sections 1b and 1c
    gemini_levels: tuple[int, ...] = (1, 16, 64)  # section 1d
    per_level: int = 200
    rounds: int = 4
    local_tokens: int = 128
    local_rounds: int = 5
    batch_tokens: int = 96  # section 2b: tokens per person
    batch_rounds: int = 3
    batch_people: tuple[int, ...] = (1, 2, 4, 8)  # people at once
    relay_levels: tuple[int, ...] = (1, 10, 100)
    relay_tokens: int = 2000
    streams: int = 1000
    stream_tokens: int = 20
    aborts: int = 100
    probes: int = 100
    background: int = 300
    profile_seconds: float = 10.0
    fair_a_jobs: int = 200
    fair_b_jobs: int = 20
    fair_rounds: int = 5  # B's waits pooled over the rounds: 100, enough for a p99
    burst: int = 64
    cache_rounds: int = 3
    file_chars: int = 7000
    deploy_seconds: float = 5.0  # section 9: each load's length
    deploy_rounds: int = 3
    deploy_clients: int = 32
    durability_levels: tuple[int, ...] = (1, 16, 64)  # section 10
    durability_seconds: float = 3.0
    durability_rounds: int = 6
    failover_trials: int = 3
    failover_clients: int = 16
    failover_seconds: float = 10.0
    codex_turns: int = 20  # section 11
    codex_rounds: int = 6
    mcp_levels: tuple[int, ...] = (1, 16)  # section 15: MCP gateway callers
    mcp_seconds: float = 5.0
    mcp_rounds: int = 5
    guard_runs: int = 40  # section 16: turns scanned each way
    guard_requests: int = 60  # per stack and round (and 4x as many at 16 clients)
    guard_rounds: int = 9
    tracing_requests: int = 60  # section 12: per stack and round (and 4x as many at 16 clients)
    tracing_rounds: int = 15
    work_seconds: float = 30.0  # section 13: per tree and round
    work_rounds: int = 4
    agents: agent_sessions.Shape = agent_sessions.Shape()  # section 14: people, turns, the flood's size
    agent_rounds: int = 4
    agents_local: agent_sessions.Shape = agent_sessions.Shape(turns=6, subagents=4, sub_turns=4, side_lanes=1)
    agent_local_rounds: int = 3  # the others' turns without the flood: 105, enough for a p99
    long_jobs: long_jobs.Sizes = long_jobs.Sizes()  # section 17: the long jobs' tokens, the turns' window
    office_load: office_load.Sizes = office_load.Sizes()  # section 18: clients, windows, variants


QUICK = Sizes(levels=(1, 16, 64), per_level=20, rounds=2, local_tokens=32, local_rounds=3, batch_tokens=48,
              batch_rounds=3, batch_people=(1, 4), relay_levels=(1, 10, 100),
              relay_tokens=500, streams=300, stream_tokens=10, aborts=10, probes=20, background=60,
              profile_seconds=4.0, fair_a_jobs=100, fair_b_jobs=10, fair_rounds=10, cache_rounds=2, file_chars=3000,
              deploy_seconds=2.5, durability_levels=(1, 64), durability_seconds=2.0, durability_rounds=4,
              failover_trials=1, codex_rounds=2, tracing_requests=40, tracing_rounds=5, work_seconds=15.0,
              work_rounds=2, agents=agent_sessions.Shape(turns=10, sub_turns=5), agent_rounds=1,
              agents_local=agent_sessions.Shape(turns=4, subagents=2, sub_turns=3, side_lanes=1), agent_local_rounds=1,
              long_jobs=long_jobs.Sizes(tokens=800, window=10.0, rounds=1, busy_turns=3),
              office_load=office_load.Sizes(window=2.0, rounds=1))
TINY = Sizes(upstream_tokens=8, levels=(1, 4), route_levels=(1, 4), gemini_levels=(1, 4), per_level=4, rounds=1, local_tokens=8,
             local_rounds=1, batch_tokens=8, batch_rounds=1, batch_people=(1, 4),
             relay_levels=(1, 4), relay_tokens=50, streams=20, stream_tokens=4, aborts=3, probes=3, background=5,
             profile_seconds=2.0, fair_a_jobs=20, fair_b_jobs=4, fair_rounds=1, burst=16, cache_rounds=1,
             file_chars=400,
             deploy_seconds=1.5, deploy_rounds=1, deploy_clients=8, durability_levels=(1, 4), durability_seconds=0.5,
             durability_rounds=2, failover_trials=1, failover_clients=2, failover_seconds=3.0, codex_turns=3,
             codex_rounds=1, mcp_seconds=1.0, mcp_rounds=1, guard_runs=3, guard_requests=5, guard_rounds=1,
             tracing_requests=5, tracing_rounds=1, work_seconds=3.0, work_rounds=1,
             agents=agent_sessions.Shape(people=3, turns=3, subagents=2, sub_turns=2, side_lanes=1), agent_rounds=1,
             agents_local=agent_sessions.Shape(people=2, turns=2, subagents=1, sub_turns=1, side_lanes=1),
             long_jobs=long_jobs.Sizes(tokens=24, window=0.5, rounds=1, busy_turns=1, busy_tokens=4, busy_note=2),
             office_load=office_load.Sizes(levels=(1, 4), window=0.5, rounds=1, variants=("chat", "messages streamed")))


def environment(command: str) -> dict:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    return {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "command": command, "cpu": cpu,
            "cores": os.cpu_count(), "python": platform.python_version()}


def run(sizes: Sizes, command: str, log=print, lanes: int = 1) -> dict:
    """Every section of the full run. With `lanes` above one, sections that
    start stacks of their own run that many at a time (the smoke test: the
    timings then mean nothing, the run's checks still do)."""
    parts = {"shared": lambda: run_on_one_stack(sizes, log),
             "local_batching": lambda: run_local_batching(sizes, log), "sharing": lambda: run_sharing(sizes, log),
             "deployments": lambda: deployments.measure(sizes.deploy_seconds, sizes.deploy_clients, log,
                                                        sizes.deploy_rounds),
             "durability": lambda: run_durability(sizes, log), "codex_transport": lambda: run_codex_transport(sizes, log),
             "tracing": lambda: run_tracing(sizes, log), "work_shares": lambda: run_work_shares(sizes, log),
             "agent_sessions": lambda: run_agent_sessions(sizes, log)}
    found = ({name: part() for name, part in parts.items()} if lanes == 1 else
             side_by_side(parts, lanes, first=("shared", "agent_sessions", "sharing", "durability")))
    return {"environment": environment(command), "sizes": sizes.__dict__} | found.pop("shared") | found


def side_by_side(parts: dict, lanes: int, first: tuple[str, ...] = ()) -> dict:
    """Run `parts` (name -> callable) `lanes` at a time, the names in `first`
    (the longest) started first; the first failure stops what every part
    started and is raised."""
    order = [name for name in first if name in parts] + [name for name in parts if name not in first]
    pool = ThreadPoolExecutor(lanes, thread_name_prefix="section")
    futures = {pool.submit(parts[name]): name for name in order}
    try:
        for done in as_completed(futures):
            done.result()
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        stop_all()  # the running parts' processes: they fail at once, and their threads end
        raise
    pool.shutdown()
    return {name: future.result() for future, name in futures.items()}


def run_on_one_stack(sizes: Sizes, log=print) -> dict:
    """Sections 1 to 6, on the one stack they share (LiteLLM's proxy and llama-cpp-python's server beside)."""
    results: dict = {}
    with BenchStack(sizes.upstream_tokens, sizes.upstream_rate) as endpoints:
        log("1. gateway overhead")
        rows = asyncio.run(overhead.measure(endpoints, sizes.upstream_tokens, sizes.levels, sizes.per_level,
                                            sizes.rounds))
        results["overhead"] = {"rows": rows, "added": overhead.added(rows), "setup": (
            f"Upstream: {sizes.upstream_tokens} tokens per reply, `paced` at {sizes.upstream_rate:g} tokens/s or "
            f"`instant` (all at once). {sizes.per_level} requests per way and level after a warm-up, in "
            f"{sizes.rounds} rounds taking turns; a new connection per request for every way.")}
        for name in overhead.ROUTES:
            results[name] = run_route(endpoints, sizes, name, log)
        log("profile of the c=1 path")
        results["profile"] = profile.profile_path(endpoints, sizes.profile_seconds)
        results["celery_floor"] = celery_floor.measure(endpoints.redis_url, sizes.probes)
        log("2. local model")
        results["local"] = asyncio.run(local_model.measure(endpoints, sizes.local_tokens, sizes.local_rounds))
        results["local_setup"] = (f"{sizes.local_tokens} tokens, greedy, seed 42, {sizes.local_rounds} rounds in "
                                  "turns after a warm-up; llama-cpp-python's default threads in-process, "
                                  "Switchboard's own default (physical cores) served.")
        log("3. relay capacity")
        results["relay"] = asyncio.run(relay.capacity(endpoints, sizes.relay_levels, sizes.relay_tokens))
        log(f"4. {sizes.streams} streams")
        results["thousand"] = asyncio.run(relay.thousand_streams(endpoints, sizes.streams, sizes.stream_tokens))
        results["redis_connection_bound"] = redis_connection_bound()
        log("5. abort latency")
        results["abort"] = {"streaming": abort.streaming_aborts(endpoints, sizes.aborts),
                            "queued": abort.queued_aborts(endpoints, sizes.aborts)}
        log("6. queue latency")
        results["queue_latency"] = asyncio.run(abort.queue_latency(endpoints, sizes.probes, sizes.background))
    return results


def run_route(endpoints, sizes: Sizes, name: str, log=print) -> dict:
    """1b-d. One of the agents' routes beside the chat route."""
    log(f"1b-d. the {name} route")
    levels = sizes.gemini_levels if name == "gemini" else sizes.route_levels
    rows = asyncio.run(overhead.measure(endpoints, sizes.upstream_tokens, levels, sizes.per_level, sizes.rounds,
                                        functools.partial(overhead.ROUTES[name].ways, name)))
    return {"rows": rows, "added": overhead.added(rows)}


def run_gemini_route(sizes: Sizes, log=print) -> dict:
    """1d alone: the Gemini route beside the chat route, on section 1's stack."""
    with BenchStack(sizes.upstream_tokens, sizes.upstream_rate) as endpoints:
        return run_route(endpoints, sizes, "gemini", log)


def run_codex_transport(sizes: Sizes, log=print) -> dict:
    """11. Codex's tool loop over HTTP and over the Responses WebSocket."""
    log("11. codex: a tool loop over HTTP and over the WebSocket")
    return codex_transport.measure(sizes.codex_turns, sizes.codex_rounds, log)


def run_tracing(sizes: Sizes, log=print, before: Path | None = None) -> dict:
    """12. Tracing off and on (and, with `before`, the tree before tracing existed)."""
    log("12. tracing: off and on" + (" and before" if before else ""))
    return tracing.measure(sizes.tracing_requests, sizes.tracing_rounds, before, log)


def run_work_shares(sizes: Sizes, log=print, before: Path | None = None) -> dict:
    """13. Two people's shares of a busy model's work (and, with `before`, an older tree's)."""
    log("13. work shares: an agent's long turns beside short chat" + (", and before" if before else ""))
    return work_shares.measure(sizes.work_seconds, sizes.work_rounds, before, log)


def run_agent_sessions(sizes: Sizes, log=print, before: Path | None = None) -> dict:
    """14. Eight agent sessions while one person floods (and, with `before`, an older tree's shares)."""
    log("14. agent sessions: eight people's agents, one flooding" + (", and before" if before else ""))
    return agent_sessions.measure(agent_sessions.UPSTREAM, sizes.agents, sizes.agent_rounds, before, log)


def run_agent_sessions_local(sizes: Sizes, log=print, before: Path | None = None) -> dict:
    """14b. The same on the local model, scaled down to its context (and, with `before`, an older tree)."""
    log("14b. agent sessions on the local model" + (", and before" if before else ""))
    return agent_sessions.measure(agent_sessions.LOCAL, sizes.agents_local, sizes.agent_local_rounds, before, log)


def run_durability(sizes: Sizes, log=print) -> dict:
    """10. Redis persistence's cost, and a failover's pause."""
    return {"persistence": durability.persistence(sizes.durability_levels, sizes.durability_seconds,
                                                  sizes.durability_rounds, log),
            "failover": durability.failover(sizes.failover_trials, sizes.failover_clients, sizes.failover_seconds,
                                            log)}


def run_mcp_gateway(sizes: Sizes, log=print, before: Path | None = None) -> dict:
    """15. A tool call through the MCP gateway, and a model's server-side call, against the same call made
    directly on the server (and, with `before`, an older tree's)."""
    log("15. MCP tools: a call through /mcp and server-side against the same call on the server"
        + (", and before" if before else ""))
    return mcp_gateway.measure(sizes.mcp_levels, sizes.mcp_seconds, sizes.mcp_rounds, log, before)


def run_guard(sizes: Sizes, log=print) -> dict:
    """16. The guard: its scan of one agent's turn, and a stack with it off against one with it on."""
    return guard.measure(sizes.guard_runs, sizes.guard_requests, sizes.guard_rounds, log)


def run_long_jobs(sizes: Sizes, log=print, before: Path | None = None) -> dict:
    """17. Short turns beside one person's four long jobs on the local model (and, with `before`, an older tree)."""
    return long_jobs.measure(sizes.long_jobs, before, log)


def run_office_load(sizes: Sizes, log=print, before: Path | None = None) -> dict:
    """18. An office's load on an instant upstream, against LiteLLM (and, with `before`, an older tree)."""
    return office_load.measure(sizes.office_load, before, log)


def run_sharing(sizes: Sizes, log=print) -> dict:
    """7. Sharing the server: each part on a small stack of its own."""
    log("7. sharing: fairness (fair, then FIFO)")
    result = {"fairness": sharing.fairness(sizes.fair_a_jobs, sizes.fair_b_jobs, sizes.fair_rounds)}
    log("7. sharing: anonymous burst")
    result["burst"] = sharing.anonymous_burst(sizes.burst)
    log("7. sharing: prompt cache")
    result["prompt_cache"] = sharing.prompt_cache(sizes.cache_rounds, sizes.file_chars)
    return result


def run_local_batching(sizes: Sizes, log=print) -> dict:
    """2b. Several people on the local model at once, apart from section 1's stack."""
    log("2b. local model, shared")
    return local_batching.measure(sizes.batch_tokens, sizes.batch_rounds, log, sizes.batch_people)


# The sections run alone by a flag of their own: flag -> (the report's section, its runner).
ONE_SECTION = {"local-batching": ("local_batching", run_local_batching), "sharing-only": ("sharing", run_sharing),
               "gemini-route": ("gemini", run_gemini_route),
               "durability": ("durability", run_durability),
               "codex-transport": ("codex_transport", run_codex_transport), "tracing": ("tracing", run_tracing),
               "work-shares": ("work_shares", run_work_shares),
               "agent-sessions": ("agent_sessions", run_agent_sessions),
               "agent-sessions-local": ("agent_sessions_local", run_agent_sessions_local),
               "mcp-gateway": ("mcp_gateway", run_mcp_gateway), "guard": ("guard", run_guard),
               "long-jobs": ("long_jobs", run_long_jobs), "office-load": ("office_load", run_office_load)}


def _configs(text: str) -> tuple[tuple[int, int], ...]:
    return tuple(tuple(int(n) for n in part.split("+")) for part in text.split(","))


def _scale_sizes(args) -> scale.ScaleSizes:
    sizes = scale.ScaleSizes()
    if args.quick or args.tiny:
        sizes = scale.ScaleSizes(configs=((1, 1),), levels=(1, 16) if args.tiny else scale.LEVELS,
                                 warmup=0.5 if args.tiny else 1.0, window=1.0 if args.tiny else 3.0,
                                 rounds=1, profile_seconds=0 if args.tiny else 3.0, profile_rounds=1)
    changes = {"configs": args.configs, "slots": args.slots}
    return sizes.__class__(**{**sizes.__dict__, **{k: v for k, v in changes.items() if v is not None}})


def write(results: dict, out: Path, notes: Path | None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    if notes is not None:
        results["notes"] = notes.read_text()
    (out / "benchmarks.json").write_text(json.dumps(results, indent=1, default=str))
    chart(results, out / "benchmarks.png")
    (out / "benchmarks.md").write_text(markdown(results, "benchmarks.png"))


RUN_APART = ("scale", "agent_sessions_local", "mcp_gateway", "guard", "long_jobs", "office_load")  # by their flags


def _last_report(out: Path) -> dict:
    """The report in `out` that one section is merged into (or rendered again)."""
    path = out / "benchmarks.json"
    if not path.exists():
        raise SystemExit(f"{path} does not exist: one section is merged into an earlier report "
                         "(copy docs/benchmarks.json there, or leave out --out)")
    return json.loads(path.read_text())


def main() -> None:
    stop_on_signals()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes (about 18 minutes on 2 cores)")
    parser.add_argument("--tiny", action="store_true", help="the smallest sizes (the smoke test)")
    parser.add_argument("--lanes", type=int, default=1,
                        help="run the sections with stacks of their own this many at a time (the smoke test; "
                             "timings are then not comparable)")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "docs")
    parser.add_argument("--notes", type=Path, help="a Markdown file appended to the report (profiles, findings)")
    parser.add_argument("--render", action="store_true", help="only rewrite the report from OUT/benchmarks.json")
    parser.add_argument("--local-batching", action="store_true",
                        help="run only section 2b (the local model, shared) and merge it into OUT/benchmarks.json")
    parser.add_argument("--sharing-only", action="store_true",
                        help="run only section 7 (sharing) and merge it into OUT/benchmarks.json")
    parser.add_argument("--scale", action="store_true",
                        help="run only section 8 (scaling) and merge it into OUT/benchmarks.json")
    parser.add_argument("--deployments", action="store_true",
                        help="run only section 9 (one model on several servers) and merge it into OUT/benchmarks.json")
    parser.add_argument("--gemini-route", action="store_true",
                        help="run only section 1d (the Gemini API's route beside chat) and merge it into "
                             "OUT/benchmarks.json")
    parser.add_argument("--durability", action="store_true",
                        help="run only section 10 (Redis persistence and failover) and merge it into OUT/benchmarks.json")
    parser.add_argument("--codex-transport", action="store_true",
                        help="run only section 11 (Codex's tool loop, HTTP and WebSocket) and merge it into "
                             "OUT/benchmarks.json")
    parser.add_argument("--tracing", action="store_true",
                        help="run only section 12 (tracing off and on; with --before, the older tree too) and merge "
                             "it into OUT/benchmarks.json")
    parser.add_argument("--work-shares", action="store_true",
                        help="run only section 13 (two people's shares of a busy model's work; with --before, the "
                             "older tree's too) and merge it into OUT/benchmarks.json")
    parser.add_argument("--agent-sessions", action="store_true",
                        help="run only section 14 (eight agent sessions while one person floods; with --before, the "
                             "older tree's shares too) and merge it into OUT/benchmarks.json")
    parser.add_argument("--agent-sessions-local", action="store_true",
                        help="run only section 14b (the same on the local model, scaled down; with --before, the "
                             "older tree too; not part of the full run: about 15 minutes on 2 cores, 25 with "
                             "--before) and merge it into OUT/benchmarks.json")
    parser.add_argument("--mcp-gateway", action="store_true",
                        help="run only section 15 (a tool call through the MCP gateway, and a model's server-side "
                             "call, against the same call on the server; not part of the full run) and merge it into "
                             "OUT/benchmarks.json")
    parser.add_argument("--guard", action="store_true",
                        help="run only section 16 (the guard's scan of an agent's turn, and a stack with it off "
                             "against one with it on; not part of the full run) and merge it into OUT/benchmarks.json")
    parser.add_argument("--long-jobs", action="store_true",
                        help="run only section 17 (another person's short turns beside one person's four long jobs on "
                             "the local model; not part of the full run) and merge it into OUT/benchmarks.json")
    parser.add_argument("--office-load", action="store_true",
                        help="run only section 18 (an office's load on an instant upstream against LiteLLM; not part "
                             "of the full run) and merge it into OUT/benchmarks.json")
    parser.add_argument("--configs", type=_configs, default=None,
                        help="with --scale: web+worker process counts, e.g. 1+1,2+2,4+4,8+4 (default 1+1,2+2)")
    parser.add_argument("--slots", type=int, default=None, help="with --scale: greenlets per upstream worker")
    parser.add_argument("--before", type=Path,
                        help="with --scale, --tracing, --work-shares, --agent-sessions(-local), --mcp-gateway, "
                             "--long-jobs or --office-load: an "
                             "older source "
                             "tree "
                             "(a git worktree) measured side by side")
    args = parser.parse_args()
    if args.render:
        write(_last_report(args.out), args.out, args.notes)
        return
    sizes = TINY if args.tiny else QUICK if args.quick else Sizes()
    started = time.monotonic()
    command = "python scripts/bench.py" + (" --quick" if args.quick else " --tiny" if args.tiny else "") + (
        f" --lanes {args.lanes}" if args.lanes > 1 else "")

    def log(message: str) -> None:
        print(f"[{time.monotonic() - started:6.1f} s] {message}", flush=True)
    alone = next((flag for flag in ONE_SECTION if getattr(args, flag.replace("-", "_"))), None)
    if alone is not None:  # one section, merged into the last report with the command that ran it
        results = _last_report(args.out)
        section, runner = ONE_SECTION[alone]
        results[section] = runner(sizes, log, args.before) if alone in ("tracing", "work-shares", "agent-sessions",
                                                                        "agent-sessions-local", "mcp-gateway",
                                                                        "long-jobs", "office-load") \
            else runner(sizes, log)
        results[section]["environment"] = environment(" ".join(["python scripts/bench.py", *sys.argv[1:]]))
    elif args.deployments:
        results = _last_report(args.out)
        results["deployments"] = deployments.measure(sizes.deploy_seconds, sizes.deploy_clients, log,
                                                     sizes.deploy_rounds)
    elif args.scale:
        results = _last_report(args.out)
        results["scale"] = scale.run(_scale_sizes(args), args.before, log)
        results["scale"]["environment"] = environment(" ".join(["python scripts/bench.py", *sys.argv[1:]]))
    else:
        results = run(sizes, command, log=log, lanes=args.lanes)
        previous = args.out / "benchmarks.json"
        kept = json.loads(previous.read_text()) if previous.exists() else {}
        for section in RUN_APART:  # not part of the full run: kept from the last report
            if section in kept:
                results[section] = kept[section]
    write(results, args.out, args.notes)
    for check in check_all(results):
        print(f"{check.verdict.upper() if check.verdict == 'missed' else check.verdict:10} {check.target}: "
              f"{check.measured}" + (f" ({check.unmeasured})" if check.unmeasured else ""))
    print(f"wrote {args.out / 'benchmarks.md'} in {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
