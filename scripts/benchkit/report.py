"""docs/benchmarks.md and its chart, from a run's results."""
from __future__ import annotations

from pathlib import Path

from scripts.benchkit import guard, long_jobs, mcp_gateway, office_load, profile
from scripts.benchkit.scale_report import scale_lines
from scripts.benchkit.targets import ABORT_P99_MS, ADDED_TTFT_P50_MS, RELAY_TOKENS_PER_SECOND, Check, check_all

COMPONENT_ORDER = ("switchboard", "celery+kombu", profile.HTTP, "redis-py", "flask+werkzeug+gunicorn", "pydantic",
                   profile.HUB)


def _ms(summary: dict) -> str:
    return f"{summary['p50']:.1f} / {summary['p95']:.1f} / {summary['p99']:.1f}"


def _overhead_tables(overhead: dict) -> list[str]:
    lines = ["| upstream | c | way | TTFT p50 / p95 / p99 ms | total p50 / p95 / p99 ms | requests | failures |",
             "|---|---:|---|---|---|---:|---:|"]
    for r in overhead["rows"]:
        lines.append(f"| {r['variant']} | {r['concurrency']} | {r['way']} | {_ms(r['ttft'])} | {_ms(r['total'])} "
                     f"| {r['requests']} | {r['failures']} |")
    lines += ["", "Added over direct (the gateway's percentile minus direct's):", "",
              "| upstream | c | gateway | added TTFT p50 / p95 / p99 ms | added total p50 / p95 / p99 ms |",
              "|---|---:|---|---|---|"]
    for r in overhead["added"]:
        lines.append(f"| {r['variant']} | {r['concurrency']} | {r['way']} | {r['ttft_p50']:.1f} / {r['ttft_p95']:.1f} "
                     f"/ {r['ttft_p99']:.1f} | {r['total_p50']:.1f} / {r['total_p95']:.1f} / {r['total_p99']:.1f} |")
    return lines


def _profile_lines(results: dict) -> list[str]:
    data = results["profile"]
    if "error" in data:
        return [f"(no profile: {data['error']})"]
    lines = [f"py-spy, {profile.RATE} samples/s, on the web process and the upstream worker while "
             f"{data['requests']} `up-instant` requests ran one at a time; CPU milliseconds per request, charged "
             "to the innermost frame in one of these libraries (a socket send by redis-py is redis-py's):", "",
             "| process | total | " + " | ".join(COMPONENT_ORDER) + " |",
             "|---|---:|" + "---:|" * len(COMPONENT_ORDER)]
    for name in ("web", "upstream worker"):
        part = data[name]
        if "error" in part:
            lines.append(f"| {name} | {part['error']} |")
            continue
        cells = " | ".join(f"{profile.component_ms(part['components'], c):.2f}" for c in COMPONENT_ORDER)
        lines.append(f"| {name} | {part['cpu_ms_per_request']:.2f} | {cells} |")
    floor = results.get("celery_floor")
    if floor:
        lines += ["", "Celery alone, on the same Redis, for a task that does nothing (a gevent worker configured as "
                  "ours): send -> task starts, p50 / p95 / p99 " + _ms(floor["pickup"]) + " ms."]
    for name in ("web", "upstream worker"):
        hottest = data[name].get("hottest", [])
        lines += ["", f"Hottest frames, {name}: " + "; ".join(f"`{f}` {p}%" for f, p in hottest[:6])]
    return lines


def _local_table(results: dict) -> list[str]:
    lines = ["| way | TTFT p50 / p95 / p99 ms | decode tok/s p50 | tokens | same text |",
             "|---|---|---:|---:|---|"]
    for name, r in results["local"].items():
        lines.append(f"| {name} | {_ms(r['ttft'])} | {r['tokens_per_second']['p50']:.1f} | {r['tokens']} "
                     f"| {r['same_text']} |")
    return lines


def _batching_lines(batching: dict) -> list[str]:
    rates, each = batching["rates"], batching["each_p50"]
    lines = [batching["setup"], "", "| way | people at once | tokens/s, all | tokens/s, each (p50) |",
             "|---|---:|---:|---:|"]
    for name, rate in rates.items():
        way, _, people = name.rpartition(", ")
        if not people.isdigit():
            way, people = name, "1"
        lines.append(f"| {way} | {people} | {rate:.1f} | {each[name]:.1f} |" if name in each else
                     f"| {way} | {people} | {rate:.1f} | |")
    arrival = batching["arrival"]
    return lines + ["", f"A ~500-token prompt's time to first token: {arrival['alone_ms']:.0f} ms on the idle "
                        f"server, {arrival['beside_three_ms']:.0f} ms while three people stream."]


def _relay_tables(results: dict) -> list[str]:
    lines = ["| streams | tokens each | seconds | delivered tok/s | SSE frames per stream | failures |",
             "|---:|---:|---:|---:|---:|---:|"]
    for r in results["relay"]:
        lines.append(f"| {r['streams']} | {r['tokens_per_stream']} | {r['seconds']:.2f} | {r['tokens_per_second']:,.0f} "
                     f"| {r['frames_per_stream']} | {r['failures']} |")
    m = results["thousand"]
    lines += ["", f"{m['streams']:,} streams of {m['tokens_per_stream']} tokens on `echo:slow`: {m['correct']:,} correct "
              f"in {m['seconds']:.1f} s; TTFT p50 / p95 / p99 {_ms(m['ttft'])} ms; web process RSS "
              f"{m['web_rss_idle_mb']:.0f} MB idle, {m['web_rss_peak_mb']:.0f} MB peak; Redis clients "
              f"{m['redis_clients_idle']} idle, {m['redis_clients_peak']} peak, {m['redis_clients_after']} after."]
    return lines


def _abort_lines(results: dict) -> list[str]:
    a, q = results["abort"], results["queue_latency"]
    return [f"- streaming: socket closed -> job recorded aborted, p50 / p95 / p99 {_ms(a['streaming']['latency'])} ms "
            f"({a['streaming']['aborted']} aborts)",
            f"- queued: socket closed -> abort recorded, p50 / p95 / p99 {_ms(a['queued']['latency'])} ms; "
            f"{a['queued']['started_after_abort']} of {a['queued']['queued']} abandoned jobs started later",
            f"- queue latency (request sent -> worker starts the job), idle: p50 / p95 / p99 {_ms(q['idle'])} ms",
            f"- queue latency under load ({q['background_streams']} other streams running): "
            f"p50 / p95 / p99 {_ms(q['under_load'])} ms"]


def _sharing_lines(sharing: dict) -> list[str]:
    fair, burst, cache = sharing["fairness"], sharing["burst"], sharing["prompt_cache"]
    lines = []
    if "environment" in sharing:
        env = sharing["environment"]
        lines += [f"Run {env['date']} with `{env['command']}` (this section only).", ""]
    lines += ["### Fair shares between people", "", fair["setup"], "",
              "| policy | B's queue wait p50 / p95 / p99 ms | B's TTFT p50 / p95 / p99 ms | A's queue wait p50 / p95 "
              "/ p99 ms | one job p50 ms | failed | all done in |", "|---|---|---|---|---:|---:|---:|"]
    for policy, r in fair["rows"].items():
        lines.append(f"| {policy} | {_ms(r['b_wait_ms'])} | {_ms(r['b_ttft_ms'])} | {_ms(r['a_wait_ms'])} "
                     f"| {r['job_ms']['p50']:.0f} | {r['failed']} | {r['seconds']:.1f} s |")
    lines += ["", "### A burst with keys off", "", burst["setup"], "",
              f"{burst['succeeded']} of {burst['requests']} succeeded in {burst['seconds']:.1f} s; the workers "
              f"need {burst['workers_need_seconds']:.1f} s for them (jobs x duration / slots)."
              + (f" Errors: {'; '.join(burst['errors'])}" if burst["errors"] else ""),
              "", "### Prompt cache: people taking turns on the local model", "", cache["setup"], "",
              "| case | TTFT p50 / p95 / p99 ms | requests |", "|---|---|---:|"]
    for name, r in cache["rows"].items():
        lines.append(f"| {name} | {_ms(r)} | {r['n']} |")
    return lines


_ROUTE_SETUP = ("The same upstream and sizes as section 1, at fewer levels: `POST {path}` ({what}) on Switchboard "
                "and on LiteLLM's proxy, beside Switchboard's `/v1/chat/completions`, all over the OpenAI-compatible "
                "upstream, in turns.")
ROUTE_SECTIONS = {  # results key -> heading, setup
    "messages": ("1b. Anthropic's Messages route", _ROUTE_SETUP.format(
        path="/v1/messages", what="Anthropic's stream, as Claude Code reads it")),
    "responses": ("1c. OpenAI's Responses route", _ROUTE_SETUP.format(
        path="/v1/responses", what="OpenAI's Responses stream, as Codex reads it; LiteLLM's bridge to chat "
                                    "completions, since the upstream has no Responses API")),
    "gemini": ("1d. The Gemini API's route", _ROUTE_SETUP.format(
        path="/v1beta/models/<model>:streamGenerateContent?alt=sse",
        what="the Gemini API's stream, as Gemini CLI reads it; LiteLLM's own Gemini route, translated to chat "
             "completions").replace("at fewer levels", "at 1, 16 and 64 clients")),
}


def _deployment_lines(section: dict) -> list[str]:
    lines = [section["setup"], "", "| servers | requests/s | replies | failed |", "|---|---|---|---|"]
    lines += [f"| {count} | {row['requests_per_second']:g} | {row['ok']} | {row['failed']} |"
              for count, row in section["rows"].items()]
    killed = section["kill"]
    return lines + ["", f"One of two servers killed under load: {killed['ok']} replies, {killed['failed']} failed, "
                        f"{killed['cut']} cut mid-stream (they were streaming from the killed server)."]


def _durability_lines(section: dict) -> list[str]:
    persisted, env = section["persistence"], section.get("environment")
    lines = [f"Run {env['date']} with `{env['command']}` on {env['cpu']} ({env['cores']} cores)." if env else "",
             persisted["setup"], "", "| clients | direct req/s | none req/s | aof req/s | aof cost (rounds) | "
             "added TTFT p50, none / aof | Redis CPU per reply, none / aof |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['clients']} | {r['direct']['rps']:.0f} | {r['none']['rps']:.0f} | {r['aof']['rps']:.0f} | "
              f"{r['aof_cost']:+.1%} ({', '.join(f'{c:+.0%}' for c in r['aof_costs'])}) | "
              f"{r['none']['added_ttft_ms']:.1f} / {r['aof']['added_ttft_ms']:.1f} ms | "
              f"{r['none']['redis_cpu_ms']:.3f} / {r['aof']['redis_cpu_ms']:.3f} ms |" for r in persisted["rows"]]
    failover = section["failover"]
    lines += ["", failover["setup"], "", "| trial | promoted after | served again after | in flight, failed | "
              "failed after the kill |", "|---|---|---|---|---|"]
    lines += [f"| {n + 1} | {t['promoted_s']:.1f} s | {t['served_s']:.1f} s | {t['in_flight_failed']} | "
              f"{t['failed_after']} |" for n, t in enumerate(failover["trials"])]
    return lines


def _codex_transport_lines(section: dict) -> list[str]:
    env, rows = section.get("environment"), section["transports"]
    lines = [f"Run {env['date']} with `{env['command']}` on {env['cpu']} ({env['cores']} cores)." if env else "",
             f"A tool loop of {section['turns']} turns on echo, as Codex runs one, in {section['rounds']} sessions "
             "per transport taking turns: over HTTP the whole input every turn (`store: false`); over the "
             "WebSocket only each turn's new items after `previous_response_id` (the tools are sent every turn "
             "either way, as Codex does). Time: from sending to `response.completed`; bytes: the JSON the client "
             "sent, before compression.", "",
             "| transport | turn p50 | turn p90 | a session, p50 | bytes, first turn | bytes, last turn | "
             "bytes a session |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {name} | {r['turn_ms_p50']:.1f} ms | {r['turn_ms_p90']:.1f} ms | {r['session_ms_p50']:.0f} ms | "
              f"{r['bytes_first']:,} | {r['bytes_last']:,} | {r['bytes_per_session']:,} |" for name, r in rows.items()]
    return lines


def _tracing_lines(section: dict) -> list[str]:
    env = section.get("environment")
    lines = [f"Run {env['date']} with `{env['command']}` on {env['cpu']} ({env['cores']} cores)." if env else "",
             "The same Switchboard (a web process, a gevent worker, an upstream model on the fake server, 32 "
             f"tokens at once) with tracing off and on (every span exported over OTLP/HTTP to a local receiver: "
             f"{section['exports']:,} exports, {section['exported_bytes']:,} bytes; and keeping one trace in ten)"
             + (f", and an older tree ({section['before']}: \"before\", with its tracing on too where it had "
                "tracing)" if section.get("before") else "")
             + f"; per request kind, {section['requests']} requests at one client and {section['requests'] * 4} "
             f"at 16 per stack, pair and round, {section['rounds']} rounds, each on stacks started anew and taking "
             "the pairs in its own order. Each cost compares two stacks measured together (every client sends "
             "its requests to the two in turn, so they meet the same machine): the median over the rounds of "
             "their ratio; \"off, again\" is a second stack like \"off\": what the measurement spreads. CPU: "
             "the web and worker processes' time per request (median of the rounds)."]
    for workload, rows in section["workloads"].items():
        lines += ["", f"**{workload}**", "", "| tracing | one client p50 | one client p90 | 16 clients p50 | "
                  "CPU per request |", "|---|---|---|---|---|"]
        lines += [f"| {name} | {r['one_client_ms_p50']:.2f} ms | {r['one_client_ms_p90']:.2f} ms | "
                  f"{r['loaded_ms_p50']:.2f} ms | {r['cpu_ms_per_request']:.3f} ms |" for name, r in rows.items()]
        costs = section.get("costs", {}).get(workload, {})
        if costs:
            lines += ["", "| cost | time at one client (p50) | time at 16 clients (p50) | CPU per request |",
                      "|---|---|---|---|"]
            lines += [f"| {pair} | " + " | ".join(f"{c[m]['median']:+.1%}" for m in ("one_client_p50", "loaded_p50",
                                                                                     "cpu")) + " |"
                      for pair, c in costs.items()]
    return lines


def _work_share_lines(section: dict) -> list[str]:
    env = section.get("environment")
    lines = [f"Run {env['date']} with `{env['command']}` on {env['cpu']} ({env['cores']} cores)." if env else "",
             f"Two people with equal weights on an upstream of fixed capacity (the benchmark's server: one request "
             f"at a time, {section['rate']:,} tokens a second read or written, so a request's time is its tokens'): "
             f"alice's agent sends {section['agent_words']:,}-token turns, bob chats in {section['chat_words']}-token "
             f"turns, each with {section['lanes']} requests outstanding for {section['seconds']:g} s, replies of "
             f"{section['reply']} tokens; {section['rounds']} round(s), each tree on a stack started anew, in turns"
             + (f"; \"before\" is {section['before']}" if section.get("before") else "") + ". Share: of the tokens the model read and wrote, alice's (median of the rounds).", "",
             "| shares | alice's share of the work | requests served (alice / bob) | bob's first token p50 | p99 |",
             "|---|---|---|---|---|"]
    lines += [f"| {name} | {t['alice_share']:.1%} | {t['requests']['alice']} / {t['requests']['bob']} | "
              f"{t['bob_ttft_ms']['p50']:.0f} ms | {t['bob_ttft_ms']['p99']:.0f} ms |"
              for name, t in section["trees"].items()]
    return lines


def _agent_session_lines(section: dict) -> list[str]:
    env, shape = section.get("environment"), section["shape"]
    where = (f"on two upstream servers of {section['capacity']} places each ({section['rate']:,} tokens a second "
             f"read or written per request, a prefix cache of {section['cache']} conversations each)"
             if section.get("setup", "upstream") == "upstream" else
             "on the local model (smollm2:135m, 4 sequences of 8,192 tokens, a 2 GB RAM prompt cache, one worker)")
    work = "the upstreams read" if section.get("setup", "upstream") == "upstream" else "the model read"
    lines = [f"Run {env['date']} with `{env['command']}` on {env['cpu']} ({env['cores']} cores)." if env else "",
             f"{shape['people']} people with equal weights, each with one agent session of {shape['turns']} turns "
             f"(Claude Code's shape: a {section['system_words']:,}-word system prompt with its 24 tools resent every "
             f"turn, a {section['result_words']:,}-word tool result and a {section['reply']}-token reply added "
             f"each turn), {where}. "
             f"With the flood, p0 also runs {shape['subagents']} subagent sessions of {shape['sub_turns']} turns "
             f"at once (new ones as they end) and {shape['side_lanes']} lane(s) of side calls (page summaries on "
             f"`claude-haiku-4-5`, one-token quota probes); the others start once it is under way. "
             f"{section['rounds']} round(s), each run on a stack started anew"
             + (f"; \"before\" is {section['before']}, an older tree" if section.get("before") else "")
             + ". The others' first tokens are of their turns after the first (a first turn reads the system "
             f"prompt cold); work is the tokens {work} (not from a cache) and wrote; the cache hit is "
             "of what a session's turn had sent before, read from a cache. First tokens pooled over the rounds; the "
             "rest, medians of the rounds.", "",
             "| policy | others' first token p50, alone / flood | p99, alone / flood | ratio p50 / p99 | "
             "p0's share of the work, flood | cache hit, alone / flood |", "|---|---|---|---|---|---|"]
    for name, p in section["policies"].items():
        alone, flood = p["alone"], p["flood"]
        lines.append(f"| {name} | {alone['others_ttft_ms']['p50']:.0f} / {flood['others_ttft_ms']['p50']:.0f} ms | "
                     f"{alone['others_ttft_ms']['p99']:.0f} / {flood['others_ttft_ms']['p99']:.0f} ms | "
                     f"{p['ttft_ratio']['p50']:.2f} / {p['ttft_ratio']['p99']:.2f} | "
                     f"{flood['shares'].get('p0', 0):.1%} | {alone['cache_hit']:.1%} / {flood['cache_hit']:.1%} |")
    return lines


def _verdict(check: Check) -> str:
    if check.unmeasured:
        return f"unmeasured: {check.unmeasured}"
    return "yes" if check.met else "**no**"


def markdown(results: dict, chart_name: str) -> str:
    checks = check_all(results)
    env = results["environment"]
    lines = ["# Benchmarks", "",
             f"Run {env['date']} with `{env['command']}` on {env['cpu']} ({env['cores']} cores), Python "
             f"{env['python']}; everything on loopback on this one machine, client included. Machines like this "
             "are noisy: read the ratios and the differences between contenders measured in the same run, in "
             "turns, rather than the absolute times.", "",
             f"![benchmark chart]({chart_name})", "", "## Targets", "",
             "| target | measured | met |", "|---|---|---|"]
    lines += [f"| {c.target} | {c.measured} | {_verdict(c)} |" for c in checks]
    lines += ["", "## 1. Gateway overhead", "", results["overhead"]["setup"], ""]
    lines += _overhead_tables(results["overhead"])
    for route, (heading, setup) in ROUTE_SECTIONS.items():
        if results.get(route):
            lines += ["", f"## {heading}", "", setup, ""] + _overhead_tables(results[route])
    lines += ["", "### Where the time of one request goes", ""] + _profile_lines(results)
    lines += ["", "## 2. Local model", "", results["local_setup"], ""] + _local_table(results)
    if results.get("local_batching"):
        lines += ["", "## 2b. Local model, shared", ""] + _batching_lines(results["local_batching"])
    lines += ["", "## 3-4. Relay capacity and 1,000 streams", ""] + _relay_tables(results)
    lines += ["", "## 5-6. Abort and queue latency", ""] + _abort_lines(results)
    if results.get("sharing"):
        lines += ["", "## 7. Sharing the server", ""] + _sharing_lines(results["sharing"])
    if results.get("scale"):
        lines += ["", "## 8. Scaling: web processes x upstream workers", ""] + scale_lines(results["scale"])
    if results.get("deployments"):
        lines += ["", "## 9. One model on several servers", ""] + _deployment_lines(results["deployments"])
    if results.get("durability"):
        lines += ["", "## 10. Redis persistence and failover", ""] + _durability_lines(results["durability"])
    if results.get("mcp_gateway"):
        lines += ["", "## 15. The MCP gateway and server-side tools: a tool call against the same call on the "
                  "server", ""] + \
            mcp_gateway.lines(results["mcp_gateway"])
    if results.get("codex_transport"):
        lines += ["", "## 11. Codex's transports: HTTP and the Responses WebSocket", ""] + _codex_transport_lines(
            results["codex_transport"])
    if results.get("tracing"):
        lines += ["", "## 12. What tracing costs", ""] + _tracing_lines(results["tracing"])
    if results.get("work_shares"):
        lines += ["", "## 13. Shares by work: an agent's long turns beside short chat", ""] + _work_share_lines(
            results["work_shares"])
    if results.get("agent_sessions"):
        lines += ["", "## 14. Agent sessions while one person floods", ""] + _agent_session_lines(
            results["agent_sessions"])
    if results.get("agent_sessions_local"):
        lines += ["", "## 14b. Agent sessions on the local model while one person floods", ""] + _agent_session_lines(
            results["agent_sessions_local"])
    if results.get("guard"):
        lines += ["", "## 16. What the guard costs (secrets kept from hosted models)", ""] + guard.lines(
            results["guard"])
    if results.get("long_jobs"):
        lines += ["", "## 17. Short turns beside a colleague's four long jobs (the local model)", ""] + long_jobs.lines(
            results["long_jobs"])
    if results.get("office_load"):
        lines += ["", "## 18. An office's load against LiteLLM (what a request costs)", ""] + office_load.lines(
            results["office_load"])
    notes = results.get("notes")
    if notes:
        lines += ["", "## Notes", "", notes.strip()]
    return "\n".join(lines) + "\n"


def chart(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(2, 2, figsize=(12, 8.5))
    _chart_overhead(axes[0][0], results)
    _chart_local(axes[0][1], results)
    _chart_relay(axes[1][0], results)
    _chart_abort(axes[1][1], results)
    figure.suptitle("Switchboard benchmarks (one machine, loopback)")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _chart_overhead(ax, results: dict) -> None:
    added = [r for r in results["overhead"]["added"] if r["variant"] == "paced"]
    levels = sorted({r["concurrency"] for r in added})
    gateways = sorted({r["way"] for r in added}, key=lambda w: w != "switchboard")
    width = 0.8 / (2 * len(gateways))
    for g_index, gateway in enumerate(gateways):
        for q_index, q in enumerate(("p50", "p99")):
            values = [next(r[f"ttft_{q}"] for r in added if r["way"] == gateway and r["concurrency"] == c)
                      for c in levels]
            offset = (2 * g_index + q_index) * width
            ax.bar([i + offset for i in range(len(levels))], values, width, label=f"{gateway} {q}")
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(levels))], [f"c={c}" for c in levels])
    ax.set_yscale("log")  # c=1 is a few ms, c=64 a second: one linear axis hides c=1
    ax.axhline(ADDED_TTFT_P50_MS, color="red", linestyle="--", linewidth=1, label="target p50 at c=1")
    ax.set_ylabel("added time to first token, ms (log)")
    ax.set_title("Gateway overhead over direct (paced upstream)")
    ax.legend(fontsize=8)


def _chart_local(ax, results: dict) -> None:
    names = list(results["local"])
    values = [results["local"][n]["tokens_per_second"]["p50"] for n in names]
    ax.bar(range(len(names)), values, color=["#888", "#8ac", "#c84", "#48c"][:len(names)])
    ax.set_xticks(range(len(names)), [n.replace(" server", "\nserver").replace(", ", ",\n") for n in names],
                  fontsize=8)
    ax.set_ylabel("tokens / s (p50)")
    ax.set_title("SmolLM2-135M decode rate")


def _chart_relay(ax, results: dict) -> None:
    rows = results["relay"]
    ax.bar([str(r["streams"]) for r in rows], [r["tokens_per_second"] for r in rows], color="#48c")
    ax.axhline(RELAY_TOKENS_PER_SECOND, color="red", linestyle="--", label="target")
    ax.set_xlabel("concurrent streams")
    ax.set_ylabel("tokens / s delivered")
    ax.set_title("Relay capacity of one web process (echo)")
    ax.legend(fontsize=8)


def _chart_abort(ax, results: dict) -> None:
    a = results["abort"]
    labels = ["streaming p50", "streaming p99", "queued p50", "queued p99"]
    values = [a["streaming"]["latency"]["p50"], a["streaming"]["latency"]["p99"],
              a["queued"]["latency"]["p50"], a["queued"]["latency"]["p99"]]
    ax.bar(labels, values, color="#4a4")
    ax.axhline(ABORT_P99_MS, color="red", linestyle="--", label="target (p99, streaming)")
    ax.set_ylabel("ms from socket close")
    ax.set_title("Abort latency")
    ax.legend(fontsize=8)
