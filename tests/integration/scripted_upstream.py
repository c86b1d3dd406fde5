"""A small local OpenAI-compatible upstream whose behaviour is chosen by the
requested model name. It replays recorded streams byte for byte, answers
with scripted statuses, stalls on purpose, and records every request and
the moment each client went away. Model "held" holds a long prompt (over
100,000 characters) until the test releases it, and answers short ones at
once. Models "cached-<name>" each keep a prefix cache of their own (a
deployment's, by whole messages, as vLLM's) and say in their usage how much
of a prompt they read from it; the first of them to be asked holds its
answer until two of them are answering at once (for at most 10 s), so two
requests sent together are in flight together."""
from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from scripts.benchkit.upstream import PrefixCache

RECORDINGS = Path(__file__).resolve().parents[1] / "fixtures" / "upstream"


class ScriptedUpstream:
    def __init__(self):
        self.requests: list[dict] = []
        self.closed_at: dict[str, float] = {}
        self.counts: Counter = Counter()
        self.held = threading.Semaphore(0)  # one release() lets one held request answer
        self.caches: dict[str, PrefixCache] = {}
        self.cached_in_flight, self.cached_met = 0, threading.Event()
        self._lock = threading.Lock()
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):  # a health probe (/api/version, /v1/models)
                upstream._headers(self, 200, content_type="application/json")
                self.wfile.write(b"{}")

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                model = body.get("model", "")
                upstream.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                upstream.counts[model] += 1
                self.body = body
                upstream.respond(self, model)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def last_body(self, model: str) -> dict:
        return [r["body"] for r in self.requests if r["body"].get("model") == model][-1]

    # behaviours ---------------------------------------------------------
    def respond(self, handler, model: str) -> None:
        if handler.path.startswith("/api/"):  # the Ollama protocol
            return self._ollama(handler, model)
        if handler.path.startswith("/v1/messages"):  # Anthropic's
            return self._anthropic(handler, model)
        if model == "reasoning":  # vLLM with a reasoning parser: reasoning_content deltas, the answer, usage
            usage = {"prompt_tokens": 4, "completion_tokens": 5, "completion_tokens_details": {"reasoning_tokens": 2}}
            return self._stream(handler, _chunk("Let me see. ", "reasoning_content") + _chunk("Two.", "reasoning_content")
                                + _chunk("It is 2.") + b"data: " + json.dumps({"choices": [], "usage": usage}).encode()
                                + b"\n\n" + b"data: [DONE]\n\n")
        kind, _, arg = model.partition("-")
        if kind == "shape":
            return self._stream(handler, (RECORDINGS / f"{arg}.sse").read_bytes())
        if kind == "status":
            return self._status(handler, int(arg))
        if model == "too-long":  # vLLM's and OpenAI's words
            return self._refuse(handler, {"error": {"message": "This model's maximum context length is 4096 tokens. "
                                                               "However, your messages resulted in 5000 tokens."}})
        if model == "flaky" and self.counts[model] == 1:
            return self._status(handler, 503)
        if model == "slow-first":
            time.sleep(1.5)
            return self._stream(handler, (RECORDINGS / "text.sse").read_bytes())
        if model == "stall":
            return self._stream(handler, _chunk("partial"), stall_after=3.0)
        if kind == "endless":  # "endless-60": for 60 s (else 20)
            return self._endless(handler, model, float(arg or 20))
        if model == "hang":
            return self._hang(handler, model)
        if model == "held" and len(json.dumps(handler.body)) > 100_000:
            return self._held(handler)
        if kind == "cached":
            return self._cached(handler, model)
        return self._stream(handler, (RECORDINGS / "text.sse").read_bytes())

    @staticmethod
    def _headers(handler, status: int, extra: dict | None = None, content_type="text/event-stream") -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        for name, value in (extra or {}).items():
            handler.send_header(name, value)
        handler.end_headers()

    def _status(self, handler, status: int) -> None:
        extra = {"Retry-After": "7"} if status in (429, 503, 529) else {}
        self._headers(handler, status, extra, "application/json")
        handler.wfile.write(json.dumps({"error": {"message": f"scripted {status}"}}).encode())

    def _refuse(self, handler, body: dict) -> None:
        self._headers(handler, 400, content_type="application/json")
        handler.wfile.write(json.dumps(body).encode())

    def _stream(self, handler, data: bytes, stall_after: float = 0) -> None:
        self._headers(handler, 200)
        for frame in data.split(b"\n\n"):
            if frame:
                handler.wfile.write(frame + b"\n\n")
                handler.wfile.flush()
        if stall_after:
            time.sleep(stall_after)
            handler.wfile.write(b"data: [DONE]\n\n")

    def _ollama(self, handler, model: str) -> None:
        """/api/chat as Ollama streams it: thinking first (model "think"), then
        the answer, then the done line."""
        self._headers(handler, 200, content_type="application/x-ndjson")
        pieces = [("thinking", "Let me see. "), ("thinking", "Two."), ("content", "It is 2.")] if model == "think" \
            else [("content", "ok")]
        for field, text in pieces:
            line = {"model": model, "message": {"role": "assistant", "content": "", field: text}, "done": False}
            handler.wfile.write(json.dumps(line).encode() + b"\n")
        done = {"model": model, "message": {"role": "assistant", "content": ""}, "done": True, "done_reason": "stop",
                "prompt_eval_count": 3, "eval_count": len(pieces)}
        handler.wfile.write(json.dumps(done).encode() + b"\n")

    def _anthropic(self, handler, model: str) -> None:
        """Anthropic's Messages stream, byte for byte as its API sends one:
        a text reply; thinking with its signature ("think"); a tool call
        whose input comes in pieces ("tool"); an error event after the
        first text ("error"); its count_tokens."""
        if handler.path.startswith("/v1/messages/count_tokens"):
            self._headers(handler, 200, content_type="application/json")
            handler.wfile.write(b'{"input_tokens":42}')
            return None
        if model.startswith("status-"):
            return self._status(handler, int(model.removeprefix("status-")))
        if model == "anthropic-too-long":
            return self._refuse(handler, {"type": "error", "error": {
                "type": "invalid_request_error", "message": "prompt is too long: 210000 tokens > 200000 maximum"}})
        kind = model.removeprefix("anthropic-")
        blocks = {"think": [("thinking", ["Let me see. ", "Two."], "c2lnbmVkLWJ5LXVwc3RyZWFt"),
                            ("redacted_thinking", [], "RW5jcnlwdGVk"), ("text", ["It is 2."], "")],
                  "tool": [("text", ["Reading."], ""), ("tool_use", ['{"file_pa', 'th": "/a.txt"}'], "")]}.get(
            kind, [("text", ["Hello", " from upstream"], "")])
        frames = [_named("message_start", message={
            "id": "msg_up1", "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": {
                "input_tokens": 5, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 7, "output_tokens": 1}})]
        for index, (block, pieces, signed) in enumerate(blocks):
            frames += _anthropic_block(index, block, pieces, signed)
            if kind == "error":
                frames.append(_named("error", error={"type": "overloaded_error", "message": "Overloaded"}))
                return self._stream(handler, b"".join(frames))
        stop = "tool_use" if kind == "tool" else "end_turn"
        frames += [_named("message_delta", delta={"stop_reason": stop, "stop_sequence": None},
                          usage={"output_tokens": 9}), _named("message_stop")]
        self._stream(handler, b"".join(frames))

    def _endless(self, handler, model: str, seconds: float) -> None:
        self._headers(handler, 200)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if _client_gone(handler.connection):
                self.closed_at[model] = time.monotonic()
                return
            try:
                handler.wfile.write(_chunk("tick "))
                handler.wfile.flush()
            except OSError:
                self.closed_at[model] = time.monotonic()
                return
            time.sleep(0.05)

    def release(self) -> None:
        """Lets one held request answer."""
        self.held.release()

    def _held(self, handler) -> None:
        """A long prompt the upstream is still reading: nothing until
        released (for at most 60 s), then the text."""
        if self.held.acquire(timeout=60):
            self._stream(handler, (RECORDINGS / "text.sse").read_bytes())

    def _cached(self, handler, model: str) -> None:
        """The answer, after the prompt was looked up in this model's own
        prefix cache: its usage counts words as tokens."""
        with self._lock:
            self.cached_in_flight += 1
            if self.cached_in_flight >= 2:
                self.cached_met.set()
            cache = self.caches.setdefault(model, PrefixCache(8))
        try:
            self.cached_met.wait(10)
            reply = "Noted."
            messages = handler.body.get("messages", [])
            with self._lock:
                cached = cache.read(messages, reply)
            prompt = sum(len(str(m.get("content") or "").split()) for m in messages)
            usage = {"prompt_tokens": prompt, "completion_tokens": 1, "total_tokens": prompt + 1,
                     "prompt_tokens_details": {"cached_tokens": cached}}
            self._stream(handler, _chunk(reply) + b"data: " + json.dumps({"choices": [], "usage": usage}).encode()
                         + b"\n\n" + b"data: [DONE]\n\n")
        finally:
            with self._lock:
                self.cached_in_flight -= 1

    def _hang(self, handler, model: str) -> None:
        """Send nothing at all (an upstream still loading), watching for the
        client to give up."""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if _client_gone(handler.connection, wait=0.02):
                self.closed_at[model] = time.monotonic()
                return


def _client_gone(connection: socket.socket, wait: float = 0) -> bool:
    readable, _, _ = select.select([connection], [], [], wait)
    if not readable:
        return False
    try:
        return connection.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def _chunk(text: str, field: str = "content") -> bytes:
    return b"data: " + json.dumps({"choices": [{"index": 0, "delta": {field: text}, "finish_reason": None}]}).encode() + b"\n\n"


def _named(kind: str, **fields) -> bytes:
    return f"event: {kind}\ndata: ".encode() + json.dumps({"type": kind, **fields}).encode() + b"\n\n"


def _anthropic_block(index: int, block: str, pieces: list[str], signature: str) -> list[bytes]:
    """One content block; `signature`: a thinking block's, or a redacted one's data."""
    if block == "redacted_thinking":  # whole in its start, no deltas
        return [_named("content_block_start", index=index, content_block={"type": block, "data": signature}),
                _named("content_block_stop", index=index)]
    start = {"text": {"type": "text", "text": ""}, "thinking": {"type": "thinking", "thinking": "", "signature": ""},
             "tool_use": {"type": "tool_use", "id": "toolu_up1", "name": "read_file", "input": {}}}[block]
    delta_of = {"text": lambda p: {"type": "text_delta", "text": p},
                "thinking": lambda p: {"type": "thinking_delta", "thinking": p},
                "tool_use": lambda p: {"type": "input_json_delta", "partial_json": p}}[block]
    frames = [_named("content_block_start", index=index, content_block=start)]
    frames += [_named("content_block_delta", index=index, delta=delta_of(p)) for p in pieces]
    if signature:
        frames.append(_named("content_block_delta", index=index, delta={"type": "signature_delta",
                                                                         "signature": signature}))
    return frames + [_named("content_block_stop", index=index)]
