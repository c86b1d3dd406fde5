"""1. Gateway overhead: the same upstream reached directly, through
Switchboard's `openai` backend (HTTP, admission, queue, worker, pub/sub,
relay) and through LiteLLM's proxy, at several concurrency levels; and the
agents' routes, Anthropic's /v1/messages (1b), OpenAI's /v1/responses (1c)
and the Gemini API's :streamGenerateContent (1d), beside
/v1/chat/completions on both gateways, over the same OpenAI-compatible
upstream.

The ways take turns in rounds, each round starting with the next way, so
that drift in a noisy machine's speed, and the tail of work a way's replies
leave, is shared between them instead of falling on one. Every reply is checked: the
expected text, the expected token count, no error.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

from scripts.benchkit.client import StreamResult, stream
from scripts.benchkit.stack import LITELLM_KEY, Endpoints
from scripts.benchkit.stats import run_concurrently, summary
from scripts.benchkit.upstream import WORD

CHAT_PATH, MESSAGES_PATH, RESPONSES_PATH = "/v1/chat/completions", "/v1/messages", "/v1/responses"
GEMINI_PATH = "/v1beta/models/{model}:streamGenerateContent?alt=sse"  # (a path may name the model: formatted)
MESSAGES = [{"role": "user", "content": "Say something."}]


class Way(NamedTuple):
    port: int
    path: str  # "{model}" in it is the model's name
    body: Callable[[str, int], dict]  # (model, tokens) -> request body
    model_prefix: str = ""
    headers: dict = {}


def chat_body(model: str, tokens: int) -> dict:
    return {"model": model, "stream": True, "messages": MESSAGES, "max_tokens": tokens,
            "stream_options": {"include_usage": True}}


def messages_body(model: str, tokens: int) -> dict:
    return {"model": model, "stream": True, "messages": MESSAGES, "max_tokens": tokens}


def responses_body(model: str, tokens: int) -> dict:
    return {"model": model, "stream": True, "input": MESSAGES, "max_output_tokens": tokens, "store": False}


def gemini_body(model: str, tokens: int) -> dict:
    return {"contents": [{"role": "user", "parts": [{"text": MESSAGES[0]["content"]}]}],
            "generationConfig": {"maxOutputTokens": tokens}}


def _litellm_key() -> dict:
    return {"Authorization": f"Bearer {LITELLM_KEY}"}


def ways(endpoints: Endpoints) -> dict[str, Way]:
    """The chat completions route: directly, through Switchboard, through LiteLLM."""
    found = {"direct": Way(endpoints.upstream_port, CHAT_PATH, chat_body),
             "switchboard": Way(endpoints.web_port, CHAT_PATH, chat_body, "up-")}
    if endpoints.litellm_port:
        found["litellm"] = Way(endpoints.litellm_port, CHAT_PATH, chat_body, "up-", _litellm_key())
    return found


class Route(NamedTuple):
    """One of the agents' routes, measured beside Switchboard's chat route."""

    path: str
    body: Callable[[str, int], dict]
    litellm_prefix: str  # LiteLLM's deployments that reach the upstream by chat completions

    def ways(self, name: str, endpoints: Endpoints) -> dict[str, Way]:
        found = {"direct": Way(endpoints.upstream_port, CHAT_PATH, chat_body),
                 "switchboard chat": Way(endpoints.web_port, CHAT_PATH, chat_body, "up-"),
                 f"switchboard {name}": Way(endpoints.web_port, self.path, self.body, "up-")}
        if endpoints.litellm_port:
            found[f"litellm {name}"] = Way(endpoints.litellm_port, self.path, self.body, self.litellm_prefix,
                                           _litellm_key())
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
                  rounds: int, ways_of: Callable[[Endpoints], dict[str, Way]] = ways) -> list[dict]:
    rows = []
    for variant in ("instant", "paced"):
        for concurrency in levels:
            rows += await _level(ways_of(endpoints), variant, concurrency, tokens, per_level, rounds)
    return rows


async def _level(by_name: dict[str, Way], variant: str, concurrency: int, tokens: int, per_level: int,
                 rounds: int) -> list[dict]:
    results: dict[str, list[list[StreamResult]]] = {name: [] for name in by_name}  # each way's rounds
    batch = max(per_level // rounds, concurrency)
    names = list(by_name)
    for round_index in range(rounds + 1):  # round 0 warms every path up and is not counted
        # Each round starts with the next way: none always follows the same one (whose tail of
        # work, the records a reply leaves, would fall on it).
        for name in names[round_index % len(names):] + names[:round_index % len(names)]:
            way = by_name[name]
            model = way.model_prefix + variant
            body, path = way.body(model, tokens), way.path.format(model=model)
            done = await run_concurrently(lambda: stream(way.port, path, body, way.headers), concurrency,
                                          batch if round_index else concurrency)
            if round_index:
                results[name].append(done)
    return [_row(variant, concurrency, name, got, tokens) for name, got in results.items()]


def _row(variant: str, concurrency: int, way: str, rounds: list[list[StreamResult]], tokens: int) -> dict:
    results = [r for done in rounds for r in done]
    failures = [why for why in (check(r, tokens) for r in results) if why]
    good = [r for r in results if check(r, tokens) is None]
    return {"variant": variant, "concurrency": concurrency, "way": way, "requests": len(results),
            "failures": len(failures), "first_failure": failures[0] if failures else None,
            "ttft": summary([r.ttft for r in good]), "total": summary([r.total for r in good]),
            "ttft_p50_rounds": [summary([r.ttft for r in done if check(r, tokens) is None])["p50"]
                                for done in rounds if any(check(r, tokens) is None for r in done)]}


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


# The agents' routes (sections 1b, 1c, 1d), by their results' key. LiteLLM's
# own bridged-* deployments for Responses: its up-* ones would call the
# upstream's Responses API (scripts/benchkit/stack.py).
ROUTES = {"messages": Route(MESSAGES_PATH, messages_body, "up-"),
          "responses": Route(RESPONSES_PATH, responses_body, "bridged-"),
          "gemini": Route(GEMINI_PATH, gemini_body, "up-")}
