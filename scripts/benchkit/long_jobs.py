"""17. Short turns beside a colleague's long jobs on the local model (issue 74).

On the local model (SmolLM2-135M, four sequences, and in this tree a spare
one) as `make run` serves it, on a stack of its own per tree:

a. Alone: one person's four long jobs (a story SmolLM2 runs greedily to its
   max_tokens), started together; their tokens/s together. The trees' stacks
   run side by side and take turns at this, `rounds` times (the median).
b. Beside turns: the same four, and once all four run, another person's
   short turns (four tokens each, one after another, from another address)
   for WINDOW seconds: how many ended in the window, their p50 and p99, and
   the long jobs' tokens/s.
c. Beside a busy process: once the long jobs ended, another process keeps a
   core busy while one person takes `busy_turns` turns one after another
   (a prompt new to the model, its note said `busy_note` times: ~800 tokens
   by default; `busy_tokens` tokens greedily):
   the first turn's time to first token and decode rate (the worker chose
   its thread counts while the machine was idle), and the median of the
   others'. The trees take this one at a time.

With `before`, an older tree measured the same way, on a stack of its own
started with its own Procfile's worker slots.
"""
from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import httpx

from scripts.benchkit.sharing import _Stack
from scripts.benchkit.stats import percentile
from scripts.processes import ROOT, commit_of

REGISTRY = '[models."smollm2:135m"]\nbackend = "llamacpp"\nn_ctx = 8192\n'
WINDOW = 19.0  # seconds of short turns (the measure)


@dataclass(frozen=True)
class Sizes:
    tokens: int = 1500  # each long job's reply (about 45 s of four on 2 cores: longer than the window)
    window: float = WINDOW
    rounds: int = 2  # of the long jobs alone, the trees taking turns
    busy_turns: int = 4  # beside a busy process
    busy_tokens: int = 24
    busy_note: int = 45  # times the note's sentence is said: ~800 prompt tokens


def _story(tokens: int) -> dict:
    return {"model": "smollm2:135m", "prompt": "Write a very long story about a dragon.",
            "options": {"temperature": 0, "repeat_penalty": 1.0, "num_predict": tokens}}


def _long_job(base: str, tokens: int, started: threading.Event, out: list) -> None:
    """One long job, streamed: its tokens and seconds, from its first line."""
    with httpx.stream("POST", f"{base}/api/generate", json=_story(tokens), timeout=600) as reply:
        first = None
        for line in reply.iter_lines():
            first = first or time.monotonic()
            started.set()
            final = json.loads(line)
        out.append((final.get("eval_count", 0), time.monotonic() - first))


def _longs(base: str, tokens: int) -> tuple[list[threading.Thread], list[threading.Event], list]:
    out: list = []
    events = [threading.Event() for _ in range(4)]
    threads = [threading.Thread(target=_long_job, args=(base, tokens, e, out)) for e in events]
    for thread in threads:
        thread.start()
    return threads, events, out


def _rate(threads: list[threading.Thread], out: list, began: float) -> float:
    for thread in threads:
        thread.join()
    return sum(tokens for tokens, _ in out) / (time.monotonic() - began)


def _turns(base: str, window: float) -> list[float]:
    """Another person's short turns, one after another, for `window` seconds: each one's seconds."""
    times, deadline = [], time.monotonic() + window
    with httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2"), timeout=600) as other:
        while time.monotonic() < deadline:
            began = time.monotonic()
            reply = other.post(f"{base}/api/chat", json={
                "model": "smollm2:135m", "stream": False, "options": {"num_predict": 4},
                "messages": [{"role": "user", "content": f"Say hello to number {len(times)}."}]})
            reply.raise_for_status()
            if time.monotonic() <= deadline:
                times.append(time.monotonic() - began)
    return times


NOTE = "Here is a note about the office kitchen rota and who cleans on which day. "
NOTE_TOKENS = 17


def _busy_turn(base: str, number: int, sizes: Sizes) -> tuple[float, float]:
    """One turn on a prompt the model has not seen: seconds to its first token, and its tokens/s after."""
    began = time.monotonic()
    body = {"model": "smollm2:135m", "prompt": f"Note {number} at {time.time()}. {NOTE * sizes.busy_note}Who cleans?",
            "options": {"temperature": 0, "num_predict": sizes.busy_tokens}}
    with httpx.stream("POST", f"{base}/api/generate", json=body, timeout=900) as reply:
        first = None
        for line in reply.iter_lines():
            final = json.loads(line)
            if final.get("response") or final.get("done"):  # (not the keep-alive lines of a long prompt)
                first = first or time.monotonic()
    ended = time.monotonic()
    return first - began, max(final.get("eval_count", 1) - 1, 0) / max(ended - first, 1e-9)


def _beside_busy(base: str, sizes: Sizes) -> dict:
    """`busy_turns` turns while another process keeps a core busy: the first's, and the others' median."""
    busy = subprocess.Popen([sys.executable, "-c", "while 1: pass"])
    try:
        turns = [_busy_turn(base, n, sizes) for n in range(sizes.busy_turns)]
    finally:
        busy.kill()
        busy.wait()
    rest = turns[1:] or turns
    return {"first_ttft_s": round(turns[0][0], 2), "first_tokens_per_s": round(turns[0][1], 1),
            "ttft_s": round(statistics.median(t for t, _ in rest), 2),
            "tokens_per_s": round(statistics.median(r for _, r in rest), 1)}


def _slots(tree: Path) -> int:
    """The local worker's slots as the tree's Procfile starts it."""
    found = re.search(r"WORKER_CONCURRENCY:-(\d+)", (tree / "Procfile").read_text())
    return int(found.group(1)) if found else 4


def _run_longs(base: str, tokens: int, beside=None) -> tuple[float, list[float]]:
    """Four long jobs; once all four run, `beside` (a callable returning its turns' times) meanwhile: their
    tokens/s together, and the turns'."""
    threads, events, out = _longs(base, tokens)
    for event in events:
        event.wait(600)
    began = time.monotonic()
    turns = beside() if beside else []
    return _rate(threads, out, began), turns


def _start(stack: ExitStack, tree: Path) -> str:
    """The tree's stack, its worker's slots as its Procfile says: its address."""
    started = stack.enter_context(_Stack(REGISTRY, [(_slots(tree), "local-completion,local", "threads")], tree=tree))
    return f"http://127.0.0.1:{started.port}"


def measure(sizes: Sizes, before: Path | None = None, log=print) -> dict:
    """Both trees' stacks side by side; their long jobs alone take turns (`rounds`, the order rotating), then
    each tree's beside the turns."""
    trees = [(name, tree) for name, tree in (("now", ROOT), ("before", before)) if tree is not None]
    result = {"tokens": sizes.tokens, "window_s": sizes.window, "rounds": sizes.rounds, "busy_turns": sizes.busy_turns,
              "busy_tokens": sizes.busy_tokens, "busy_prompt_tokens": NOTE_TOKENS * sizes.busy_note, "trees": {}}
    with ExitStack() as stack:
        bases = {name: _start(stack, tree) for name, tree in trees}
        alone: dict[str, list[float]] = {name: [] for name, _ in trees}
        for index in range(sizes.rounds):
            for name, _ in trees[index % len(trees):] + trees[:index % len(trees)]:
                log(f"17. long jobs alone: {name}, round {index + 1} of {sizes.rounds}")
                alone[name].append(_run_longs(bases[name], sizes.tokens)[0])  # (as long: a rate falls with length)
        for name, tree in trees:
            log(f"17. long jobs beside short turns: {name}")
            beside, turns = _run_longs(bases[name], sizes.tokens, lambda: _turns(bases[name], sizes.window))
            result["trees"][name] = {
                "commit": commit_of(tree), "slots": _slots(tree), "alone_rounds": [round(r, 1) for r in alone[name]],
                "alone_tokens_per_s": round(statistics.median(alone[name]), 1), "beside_tokens_per_s": round(beside, 1),
                "turns": len(turns), "turn_p50_s": round(percentile(turns, 0.5), 3) if turns else None,
                "turn_p99_s": round(percentile(turns, 0.99), 3) if turns else None}
        for name, _ in trees:
            log(f"17. one person's turns beside a busy process: {name}")
            result["trees"][name]["busy"] = _beside_busy(bases[name], sizes)
    return result


def lines(section: dict) -> list[str]:
    found = [f"One person's four long jobs ({section['tokens']} tokens each) on the local model: alone (the median "
             f"of {section['rounds']} rounds, the trees taking turns), and with another person's short turns (4 "
             f"tokens, one after another) for {section['window_s']:g} s once all four run; a stack of each tree's "
             "own, its worker's slots as its Procfile says:", "",
             "| tree | slots | long jobs alone, tokens/s | beside the turns, tokens/s | short turns in the window "
             "| turn p50 / p99 |", "|---|---|---|---|---|---|"]
    for name, tree in section["trees"].items():
        p50 = f"{tree['turn_p50_s']:.2f} / {tree['turn_p99_s']:.2f} s" if tree["turns"] else "none ended"
        found.append(f"| {name} ({tree['commit']}) | {tree['slots']} | {tree['alone_tokens_per_s']:.1f} | "
                     f"{tree['beside_tokens_per_s']:.1f} | {tree['turns']} | {p50} |")
    found += ["", f"Then one person's turns beside another process keeping a core busy ({section.get('busy_turns', 0)} "
              f"turns, each a ~{section.get('busy_prompt_tokens', 800)}-token prompt new to the model and "
              f"{section.get('busy_tokens', 0)} tokens; the "
              "worker chose its thread counts while the machine was idle):", "",
              "| tree | first turn: first token, decode | the others (median): first token, decode |", "|---|---|---|"]
    for name, tree in section["trees"].items():
        if busy := tree.get("busy"):
            found.append(f"| {name} | {busy['first_ttft_s']:.2f} s, {busy['first_tokens_per_s']:.1f} tokens/s | "
                         f"{busy['ttft_s']:.2f} s, {busy['tokens_per_s']:.1f} tokens/s |")
    return found
