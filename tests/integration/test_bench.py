"""The benchmark's smoke tests: `scripts/bench.py --tiny` starts its whole
stack (its own Redis, Switchboard, the fake upstream, LiteLLM's proxy,
llama-cpp-python's server), runs every section on a tiny size and writes
the report; `--scale`, `--mcp-gateway`, `--guard`, `--long-jobs` and `--office-load` add their sections. Timings are
not asserted (they are the benchmark's business); everything the benchmark
checks for correctness is. Three commands run side by side, started
together (each on stacks, ports and Redis servers of its own), and the whole
run's sections three at a time: they wait on processes far more than they
compute, and a smoke test's timings mean nothing."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from scripts.processes import ROOT

COMMANDS = {"every section": ["--tiny", "--lanes", "3"],
            "scale": ["--scale", "--tiny", "--before", str(ROOT)],  # this same tree as the older one
            "mcp gateway": ["--mcp-gateway", "--tiny"], "guard": ["--guard", "--tiny"],
            "long jobs": ["--long-jobs", "--tiny"], "office load": ["--office-load", "--tiny"]}
# Sections merged into the last report: they start from the committed one.
SEEDED = ("scale", "mcp gateway", "guard", "long jobs", "office load")
# Started together once the others ended: their stacks beside the others' would starve those's tiny windows.
AFTER = ("guard", "long jobs", "office load")


class Run:
    """One bench command started in the background: its folder (`--out`) and its output."""

    def __init__(self, name: str, out: Path):
        self.out = out
        if name in SEEDED:
            shutil.copy(ROOT / "docs" / "benchmarks.json", out / "benchmarks.json")
        self.log = (out / "output.txt").open("w+")
        self.process = subprocess.Popen([sys.executable, "scripts/bench.py", *COMMANDS[name], "--out", str(out)],
                                        cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT, text=True)

    def finished(self, timeout: float) -> str:
        """Its output, once it ended well (else the test fails with its last lines)."""
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise
        self.log.seek(0)
        output = self.log.read()
        assert code == 0, output[-6000:]
        return output

    def results(self) -> dict:
        return json.loads((self.out / "benchmarks.json").read_text())

    def report(self) -> str:
        return (self.out / "benchmarks.md").read_text()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()  # (bench.py stops what it started on SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.log.close()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    started = {name: Run(name, tmp_path_factory.mktemp(name.replace(" ", "-"))) for name in COMMANDS
               if name not in AFTER}
    yield started
    for run in started.values():
        run.stop()


@pytest.fixture(scope="module")
def later_runs(runs, tmp_path_factory):
    """The AFTER commands, started together once the first ones ended (their own tests say how)."""
    for other in runs.values():
        other.process.wait(840)
    started = {name: Run(name, tmp_path_factory.mktemp(name.replace(" ", "-"))) for name in AFTER}
    yield started
    for run in started.values():
        run.stop()


@pytest.mark.slow
@pytest.mark.timeout(900)  # fourteen sections, three at a time, beside the three runs below: about 2 min on 2 idle cores
def test_the_benchmark_runs_every_section_and_writes_its_report(runs):
    run = runs["every section"]
    run.finished(timeout=840)
    results = run.results()
    rows = results["overhead"]["rows"]
    assert {r["way"] for r in rows} == {"direct", "switchboard", "litellm"}
    assert all(r["failures"] == 0 and r["requests"] > 0 for r in rows), rows
    for route in ("messages", "responses", "gemini"):
        routed = results[route]["rows"]
        assert {r["way"] for r in routed} == {"direct", "switchboard chat", f"switchboard {route}", f"litellm {route}"}
        assert all(r["failures"] == 0 and r["requests"] > 0 for r in routed), routed
    assert all(v["same_text"] and not v["errors"] for v in results["local"].values()), results["local"]
    assert results["local_batching"]["same_tokens"], results["local_batching"]
    assert all(r["failures"] == 0 for r in results["relay"]), results["relay"]
    assert results["thousand"]["correct"] == results["thousand"]["streams"], results["thousand"]
    assert results["abort"]["streaming"]["aborted"] == results["sizes"]["aborts"]
    assert results["abort"]["queued"]["started_after_abort"] == 0
    assert results["queue_latency"]["idle"]["n"] == results["sizes"]["probes"]
    report = run.report()
    assert "## Targets" in report and "## 1. Gateway overhead" in report and "## 7. Sharing the server" in report
    assert "## 2b. Local model, shared" in report
    assert "## 1b. Anthropic's Messages route" in report and "## 1c. OpenAI's Responses route" in report
    assert "## 1d. The Gemini API's route" in report
    sharing = results["sharing"]
    assert all(r["failed"] == 0 for r in sharing["fairness"]["rows"].values()), sharing["fairness"]
    assert sharing["burst"]["succeeded"] == sharing["burst"]["requests"], sharing["burst"]
    servers = results["deployments"]
    assert all(r["failed"] == 0 and r["ok"] > 0 for r in servers["rows"].values()), servers
    assert servers["kill"]["failed"] == 0 and "## 9. One model on several servers" in report, servers["kill"]
    durability = results["durability"]
    assert all(r[mode]["failed"] == 0 and r[mode]["rps"] > 0 for r in durability["persistence"]["rows"]
               for mode in ("direct", "none", "aof")), durability["persistence"]["rows"]
    trial = durability["failover"]["trials"][0]
    assert 0 < trial["promoted_s"] < 30 and 0 < trial["served_s"] < 30, trial
    assert "## 10. Redis persistence and failover" in report
    transports = results["codex_transport"]["transports"]
    assert transports["websocket"]["bytes_last"] < transports["http"]["bytes_last"], transports  # new items only
    assert "## 11. Codex's transports" in report
    traced = results["tracing"]
    assert traced["exports"] > 0 and all(set(rows) == {"off", "off, again", "on", "on, 1 in 10"}  # spans went out
                                         for rows in traced["workloads"].values()), traced
    assert "## 12. What tracing costs" in report
    shares = results["work_shares"]["trees"]["by work"]
    assert shares["requests"]["alice"] > 0 and shares["requests"]["bob"] > shares["requests"]["alice"], shares
    assert "## 13. Shares by work" in report
    agents = results["agent_sessions"]["policies"]
    assert set(agents) == {"fifo", "by work"}, agents
    assert all(p[run]["failed"] == 0 and p[run]["requests"] > 0 for p in agents.values() for run in ("alone", "flood"))
    assert all(p["flood"]["requests"] > p["alone"]["requests"] for p in agents.values()), agents  # it flooded
    assert "## 14. Agent sessions while one person floods" in report
    assert (run.out / "benchmarks.png").read_bytes().startswith(b"\x89PNG")


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_scaling_benchmark_runs_side_by_side_and_adds_its_section(runs):
    """`--scale --tiny` with `--before` this same tree: one configuration,
    two levels, both trees and the direct way, merged into the report."""
    run = runs["scale"]
    run.finished(timeout=840)
    scale = run.results()["scale"]
    rows = scale["configs"][0]["rows"]
    assert {(r["way"], r["concurrency"]) for r in rows} == {
        (way, c) for way in ("direct", "after", "before") for c in (1, 16)}
    assert all(r["failures"] == 0 and r["requests"] > 0 for r in rows), rows
    assert all(r["cpu_ms_per_request"]["web"] > 0 and r["cpu_ms_per_request"]["worker"] > 0
               for r in rows if r["way"] != "direct"), rows
    assert "## 8. Scaling: web processes x upstream workers" in run.report()


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_mcp_gateway_benchmark_adds_its_section(runs):
    """`--mcp-gateway --tiny`: every way (direct, through the gateway, server-side and the chat without a call) at
    one and 16 callers, every call answered, merged into the report, with both targets checked."""
    run = runs["mcp gateway"]
    output = run.finished(timeout=840)
    section = run.results()["mcp_gateway"]
    assert [row["callers"] for row in section["rows"]] == [1, 16]
    assert all(reading["n"] > 0 for row in section["rows"] for way in ("direct", "gateway", "server_side", "chat")
               for reading in row[way])
    assert "## 15. The MCP gateway and server-side tools" in run.report()
    assert "tool call through the MCP gateway at one caller" in output
    assert "tool call server-side at one caller" in output


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_guard_benchmark_adds_its_section(later_runs):
    """`--guard --tiny`: the scan of a Claude Code-sized turn each way, and the stacks with the guard off, off
    again and on, each request answered (the bench asserts every status), merged into the report with its
    targets checked."""
    run = later_runs["guard"]
    output = run.finished(timeout=300)
    section = run.results()["guard"]
    assert section["scan"]["characters"] > 90_000 and section["scan"]["messages"] == 41
    assert set(section["scan"]["ways"]) == {"nothing scanned before", "earlier messages scanned",
                                            "earlier messages scanned, another worker", "restoring a reply"}
    assert all(set(rows) == {"off", "off, again", "on"} for rows in section["workloads"].values())
    assert "## 16. What the guard costs" in run.report()
    assert "guard: a 100 KB turn whose earlier messages were scanned" in output


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_long_jobs_benchmark_adds_its_section(later_runs):
    """`--long-jobs --tiny`: four long jobs on the local model alone, then beside another person's short turns,
    then a turn beside a busy process, merged into the report with its targets checked."""
    run = later_runs["long jobs"]
    output = run.finished(timeout=300)
    now = run.results()["long_jobs"]["trees"]["now"]
    assert now["slots"] == 5 and now["alone_tokens_per_s"] > 0 and now["beside_tokens_per_s"] > 0, now
    assert now["busy"]["first_ttft_s"] > 0 and now["busy"]["tokens_per_s"] > 0, now
    assert "## 17. Short turns beside a colleague's four long jobs" in run.report()
    assert "beside another process keeping a core busy" in run.report()
    assert "short turns beside four long local jobs" in output


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_office_load_benchmark_adds_its_section(later_runs):
    """`--office-load --tiny`: Switchboard and LiteLLM on the instant upstream, whole and streamed, and the
    design's floor (whole chat), every reply checked (its text, its status), merged into the report with its
    targets checked."""
    run = later_runs["office load"]
    output = run.finished(timeout=300)
    section = run.results()["office_load"]
    assert {(r["way"].split(" (")[0], r["variant"], r["clients"]) for r in section["rows"]} == {
        (way, variant, clients) for way in ("switchboard", "litellm") for variant in ("chat", "messages streamed")
        for clients in (1, 4)} | {("floor", "chat", clients) for clients in (1, 4)}
    assert all(r["failures"] == 0 for r in section["rows"]), section["rows"]
    assert sum(r["requests"] for r in section["rows"] if r["way"] != "litellm") > 0
    assert all(mb > 0 for mb in section["peak_rss_mb"]["litellm"]), section["peak_rss_mb"]
    assert "## 18. An office's load against LiteLLM" in run.report()
    assert "Peak requests/s of each way" in run.report() and "floor (flask + celery" in run.report()
    assert "web + worker resident memory <= 200 MB" in output
