"""The benchmark's smoke test: `scripts/bench.py --tiny` starts its whole
stack (its own Redis, Switchboard, the fake upstream, LiteLLM's proxy,
llama-cpp-python's server), runs every section on a tiny size and writes
the report. Timings are not asserted (they are the benchmark's business);
everything the benchmark checks for correctness is."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from scripts.processes import ROOT


@pytest.mark.slow
@pytest.mark.timeout(600)  # fourteen sections, a dozen process groups: about 2 min on 2 idle cores, 2-3 times that on busy ones
def test_the_benchmark_runs_every_section_and_writes_its_report(tmp_path):
    run = subprocess.run([sys.executable, "scripts/bench.py", "--tiny", "--out", str(tmp_path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    results = json.loads((tmp_path / "benchmarks.json").read_text())
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
    report = (tmp_path / "benchmarks.md").read_text()
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
    assert (tmp_path / "benchmarks.png").read_bytes().startswith(b"\x89PNG")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_scaling_benchmark_runs_side_by_side_and_adds_its_section(tmp_path):
    """`--scale --tiny` with `--before` this same tree: one configuration,
    two levels, both trees and the direct way, merged into the report."""
    (tmp_path / "benchmarks.json").write_text((ROOT / "docs" / "benchmarks.json").read_text())
    run = subprocess.run([sys.executable, "scripts/bench.py", "--scale", "--tiny", "--before", str(ROOT),
                          "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    scale = json.loads((tmp_path / "benchmarks.json").read_text())["scale"]
    rows = scale["configs"][0]["rows"]
    assert {(r["way"], r["concurrency"]) for r in rows} == {
        (way, c) for way in ("direct", "after", "before") for c in (1, 16)}
    assert all(r["failures"] == 0 and r["requests"] > 0 for r in rows), rows
    assert all(r["cpu_ms_per_request"]["web"] > 0 and r["cpu_ms_per_request"]["worker"] > 0
               for r in rows if r["way"] != "direct"), rows
    assert "## 8. Scaling: web processes x upstream workers" in (tmp_path / "benchmarks.md").read_text()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_mcp_gateway_benchmark_adds_its_section(tmp_path):
    """`--mcp-gateway --tiny`: every way (direct, through the gateway, server-side and the chat without a call) at
    one and 16 callers, every call answered, merged into the report, with both targets checked."""
    (tmp_path / "benchmarks.json").write_text((ROOT / "docs" / "benchmarks.json").read_text())
    run = subprocess.run([sys.executable, "scripts/bench.py", "--mcp-gateway", "--tiny", "--out", str(tmp_path)],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    section = json.loads((tmp_path / "benchmarks.json").read_text())["mcp_gateway"]
    assert [row["callers"] for row in section["rows"]] == [1, 16]
    assert all(reading["n"] > 0 for row in section["rows"] for way in ("direct", "gateway", "server_side", "chat")
               for reading in row[way])
    assert "## 15. The MCP gateway and server-side tools" in (tmp_path / "benchmarks.md").read_text()
    assert "tool call through the MCP gateway at one caller" in run.stdout
    assert "tool call server-side at one caller" in run.stdout
