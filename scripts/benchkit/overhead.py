"""1. Gateway overhead: the same upstream reached directly, through
Switchboard's `openai` backend (HTTP, admission, queue, worker, pub/sub,
relay) and through LiteLLM's proxy, at several concurrency levels.

The three ways take turns in rounds, so that drift in a noisy machine's
speed is shared between them instead of falling on one. Every reply is
checked: the expected text, the expected token count, no error.
"""
from __future__ import annotations

from scripts.benchkit.client import StreamResult, stream
from scripts.benchkit.stack import LITELLM_KEY, Endpoints
from scripts.benchkit.stats import run_concurrently, summary
from scripts.benchkit.upstream import WORD

PATH = "/v1/chat/completions"
MESSAGES = [{"role": "user", "content": "Say something."}]


def ways(endpoints: Endpoints) -> dict[str, tuple[int, str, dict]]:
    """name -> (port, model prefix, headers)."""
    found = {"direct": (endpoints.upstream_port, "", {}), "switchboard": (endpoints.web_port, "up-", {})}
    if endpoints.litellm_port:
        found["litellm"] = (endpoints.litellm_port, "up-", {"Authorization": f"Bearer {LITELLM_KEY}"})
    return found


def check(result: StreamResult, tokens: int) -> str | None:
    """Why the reply is wrong, or None."""
    expected = " ".join([WORD] * tokens)
    if result.error:
        return result.error
    if result.text != expected:
        return f"text differs: {result.text[:80]!r}"
    if result.ttft is None:
        return "no text"
    return None


async def measure(endpoints: Endpoints, tokens: int, levels: tuple[int, ...], per_level: int,
                  rounds: int) -> list[dict]:
    rows = []
    for variant in ("instant", "paced"):
        for concurrency in levels:
            rows += await _level(endpoints, variant, concurrency, tokens, per_level, rounds)
    return rows


async def _level(endpoints: Endpoints, variant: str, concurrency: int, tokens: int, per_level: int,
                 rounds: int) -> list[dict]:
    results: dict[str, list[StreamResult]] = {name: [] for name in ways(endpoints)}
    batch = max(per_level // rounds, concurrency)
    for round_index in range(rounds + 1):  # round 0 warms every path up and is not counted
        for name, (port, prefix, headers) in ways(endpoints).items():
            body = {"model": prefix + variant, "stream": True, "messages": MESSAGES, "max_tokens": tokens,
                    "stream_options": {"include_usage": True}}
            done = await run_concurrently(lambda: stream(port, PATH, body, headers), concurrency,
                                          batch if round_index else concurrency)
            if round_index:
                results[name] += done
    return [_row(variant, concurrency, name, got, tokens) for name, got in results.items()]


def _row(variant: str, concurrency: int, way: str, results: list[StreamResult], tokens: int) -> dict:
    failures = [why for why in (check(r, tokens) for r in results) if why]
    good = [r for r in results if check(r, tokens) is None]
    return {"variant": variant, "concurrency": concurrency, "way": way, "requests": len(results),
            "failures": len(failures), "first_failure": failures[0] if failures else None,
            "ttft": summary([r.ttft for r in good]), "total": summary([r.total for r in good])}


def added(rows: list[dict]) -> list[dict]:
    """Per variant, level and gateway: its percentiles minus direct's."""
    direct = {(r["variant"], r["concurrency"]): r for r in rows if r["way"] == "direct"}
    out = []
    for row in rows:
        if row["way"] == "direct":
            continue
        base = direct[(row["variant"], row["concurrency"])]
        out.append({"variant": row["variant"], "concurrency": row["concurrency"], "way": row["way"],
                    **{f"ttft_{q}": row["ttft"][q] - base["ttft"][q] for q in ("p50", "p95", "p99")},
                    **{f"total_{q}": row["total"][q] - base["total"][q] for q in ("p50", "p95", "p99")}})
    return out
