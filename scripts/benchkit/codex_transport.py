"""11. Codex's transports side by side: a tool loop of N turns on echo, as
Codex runs one, over HTTP (POST /v1/responses, `store: false`, the whole
input every turn) and over the Responses WebSocket (the same turns, each
sending only its new items after `previous_response_id`).

The conversation is Codex's own first request (tests/fixtures: its
developer messages and its 20-odd tools, the placeholders of its prose
filled to their real lengths), then turn after turn of a shell call and its
output: echo answers each output (itself a call) with the next call. The
two transports take turns, session after session; per turn: the time from
sending to `response.completed`, and the bytes the client sent (JSON, before
compression: Codex zstd-compresses an HTTP body and deflates a socket's
messages).
"""
from __future__ import annotations

import json
import re
import time
from pathlib import Path

import httpx
from websockets.sync.client import connect

from scripts.benchkit.sharing import _Stack
from scripts.benchkit.stats import percentile

FIXTURE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "codex-responses-websocket.json"
REGISTRY = '[models."echo"]\nbackend = "echo"\n'
WORKER = [(4, "local-completion,local", "threads")]
CALL = '<invoke name="exec_command"><parameter name="cmd">ls -la src/</parameter></invoke>'


def _filled(value):
    """The fixture with each "<N characters of the client's prose>" as N characters."""
    if isinstance(value, str):
        found = re.fullmatch(r"<(\d+) characters of the client's prose>", value)
        return ("lorem ipsum " * (int(found.group(1)) // 12 + 1))[:int(found.group(1))] if found else value
    if isinstance(value, list):
        return [_filled(v) for v in value]
    if isinstance(value, dict):
        return {k: _filled(v) for k, v in value.items()}
    return value


def _first_request() -> dict:
    frame = _filled(json.loads(FIXTURE.read_text())["first_frame"])
    frame["input"][-1]["content"] = [{"type": "input_text", "text": CALL}]
    return {k: v for k, v in frame.items() if k not in ("type", "stream")}


def _output(call: dict) -> dict:
    return {"type": "function_call_output", "call_id": call["call_id"], "output": CALL}


def _completed(response: dict) -> dict:
    call = response["output"][-1]
    assert call["type"] == "function_call", response["output"]
    return call


def http_session(base: str, turns: int) -> list[tuple[float, int]]:
    """(seconds, bytes sent) per turn, the whole input every turn."""
    request, measured = _first_request(), []
    with httpx.Client(base_url=base, timeout=60) as client:
        for _ in range(turns):
            body = json.dumps(request | {"stream": True}).encode()
            started = time.perf_counter()
            with client.stream("POST", "/v1/responses", content=body,
                               headers={"Content-Type": "application/json"}) as reply:
                raw = b"".join(reply.iter_bytes())
            measured.append((time.perf_counter() - started, len(body)))
            final = json.loads(raw.rstrip(b"\n").rsplit(b"\n\n", 1)[-1].split(b"data: ", 1)[1])["response"]
            call = _completed(final)
            request["input"] = request["input"] + final["output"] + [_output(call)]
    return measured


def socket_session(base: str, turns: int) -> list[tuple[float, int]]:
    """(seconds, bytes sent) per turn, only the new items after the first."""
    request, measured = _first_request(), []
    with connect(base.replace("http://", "ws://") + "/v1/responses", max_size=None) as ws:
        for _ in range(turns):
            message = json.dumps({"type": "response.create"} | request)
            started = time.perf_counter()
            ws.send(message)
            while (event := json.loads(ws.recv(timeout=60)))["type"] != "response.completed":
                assert event["type"] not in ("error", "response.failed"), event
            measured.append((time.perf_counter() - started, len(message.encode())))
            call = _completed(event["response"])
            request |= {"previous_response_id": event["response"]["id"], "input": [_output(call)]}
    return measured


def measure(turns: int, rounds: int, log=print) -> dict:
    runs: dict[str, list[list[tuple[float, int]]]] = {"http": [], "websocket": []}
    with _Stack(REGISTRY, WORKER) as stack:
        base = f"http://127.0.0.1:{stack.port}"
        http_session(base, 2), socket_session(base, 2)  # warm both paths
        for round_ in range(rounds):
            for name in (("http", "websocket") if round_ % 2 == 0 else ("websocket", "http")):
                runs[name].append((http_session if name == "http" else socket_session)(base, turns))
            log(f"codex transport: round {round_ + 1} of {rounds}")
    return {"turns": turns, "rounds": rounds, "transports": {name: _summary(sessions)
                                                              for name, sessions in runs.items()}}


def _summary(sessions: list[list[tuple[float, int]]]) -> dict:
    turns = [turn for session in sessions for turn in session]
    seconds = sorted(t for t, _ in turns)
    return {"turn_ms_p50": round(percentile(seconds, 0.5) * 1000, 1),
            "turn_ms_p90": round(percentile(seconds, 0.9) * 1000, 1),
            "session_ms_p50": round(percentile(sorted(sum(t for t, _ in s) for s in sessions), 0.5) * 1000, 1),
            "bytes_first": turns[0][1], "bytes_last": sessions[0][-1][1],
            "bytes_per_session": round(sum(b for _, b in turns) / len(sessions))}
