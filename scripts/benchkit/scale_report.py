"""Section 8 of docs/benchmarks.md (scaling), from the results of
scale.py (its targets are in targets.py)."""
from __future__ import annotations

from scripts.benchkit import profile

COMPONENTS = ("switchboard", "celery+kombu", profile.HTTP, "redis-py", "flask+werkzeug+gunicorn", "pydantic",
              profile.HUB)


def _cpu(row: dict) -> str:
    cpu = row.get("cpu_ms_per_request")
    if not cpu:
        return ""
    return f"{cpu['web']:.2f} + {cpu['worker']:.2f} = {cpu['web'] + cpu['worker']:.2f}"


def _rows_table(config: dict) -> list[str]:
    lines = ["| c | way | requests/s | TTFT p50 / p99 ms | failures | CPU ms per request: web + worker |",
             "|---:|---|---:|---|---:|---|"]
    for r in config["rows"]:
        ttft = r["ttft"]
        lines.append(f"| {r['concurrency']} | {r['way']} | {r['rps']:.0f} | {ttft['p50']:.1f} / {ttft['p99']:.1f} "
                     f"| {r['failures']} | {_cpu(r)} |")
    return lines


def _profile_table(profiles: dict) -> list[str]:
    lines = ["| tree | process | total | " + " | ".join(COMPONENTS) + " |", "|---|---|---:|" + "---:|" * len(COMPONENTS)]
    for label, data in profiles.items():
        if "error" in data:
            lines.append(f"| {label} | {data['error']} |")
            continue
        for name in ("web", "upstream worker"):
            part = data[name]
            cells = " | ".join(f"{profile.component_ms(part['components'], c):.2f}" for c in COMPONENTS)
            lines.append(f"| {label} | {name} | {part['cpu_ms_per_request']:.2f} | {cells} |")
    return lines


def _turns(sizes: dict) -> str:
    rounds = sizes.get("rounds", 1)  # reports before rounds measured one window per way
    return f", {rounds} times in turns with the other ways (the windows added up)" if rounds > 1 else ""


def scale_lines(scale: dict) -> list[str]:
    env, sizes = scale["environment"], scale["sizes"]
    cores = f"{env['cores']} cores"
    machine = f"{env['cpu']} ({cores})" if env.get("cpu") else cores
    lines = [f"Run {env['date']} with `{env['command']}` (this section only) on {machine}.", "",
             f"Closed loop: each client sends its next request when the last ended. The `instant` upstream, "
             f"{sizes['tokens']} tokens per reply; {sizes['slots']} slots (greenlets) per upstream worker. Each "
             f"level: {sizes['warmup']:g} s of warm-up, then {sizes['window']:g} s measured{_turns(sizes)}; "
             "requests/s and time to first token count the requests that ended in the windows, and CPU per "
             "request is the processes' CPU time (from /proc, every process of the group) over the windows divided "
             "by those requests."]
    if scale.get("before"):
        lines += ["", "`before` is the tree before this work (a git worktree of the older commit), run beside "
                  "`after` on its own Redis database; direct, before and after take turns at every level."]
    for config in scale["configs"]:
        lines += ["", f"### {config['webs']} web + {config['workers']} upstream worker processes", ""]
        lines += _rows_table(config)
        if config.get("profile"):
            lines += ["", "py-spy at one request at a time (as section 1), CPU ms per request"
                      f"{_profile_turns(scale['sizes'], len(config['profile']))}:", ""]
            lines += _profile_table(config["profile"])
    return lines


def _profile_turns(sizes: dict, trees: int) -> str:
    """How the profile was taken (reports before profiles took turns say nothing)."""
    rounds = sizes.get("profile_rounds", 1)
    if trees < 2 or rounds < 2:
        return ""
    return f", {sizes['profile_seconds']:g} s per tree {rounds} times in turns (the samples added up)"
