"""A minimal OpenAI-compatible streaming server for the benchmark: the
upstream that is reached directly, through Switchboard and through LiteLLM.

`POST /v1/chat/completions` with `"stream": true` streams a fixed number of
one-word tokens. The model name picks the pace: "paced" sends them at a
fixed rate, "instant" all at once, "work" takes a time proportional to the
tokens it reads and writes (a word of the prompt is a token: it reads the
prompt at the rate, then writes each token at it). A non-streaming request gets the whole
text in one JSON reply. With `--capacity N` it is a server of fixed
capacity (a GPU box): it answers N requests at once and the others wait
their turn. With `--cache N` it keeps the last N conversations' prompts and
replies (as vLLM's prefix cache does, by whole messages): a "work" request
reads only the messages after the longest prefix it holds, and says so in
its usage (`prompt_tokens_details.cached_tokens`). `GET /stats` says how many requests
it served per model and the most it ever answered at once, per model, and
the work it did per tag (the first word of a request's first user message,
marked "#first" on a conversation's first turn: tokens read, read from the
cache, that could have been (all but the last message), written, requests). Run it as its own
process, so its work is not counted against the client or the gateway:

    python -m scripts.benchkit.upstream --port 9000 --tokens 64 --rate 200

Written on asyncio with raw streams (no framework) so that the upstream
itself costs as little as possible and is the same for every contender.
"""
from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import time
from collections import OrderedDict

WORD = "tok"


def chunk(model: str, created: int, delta: dict, finish: str | None = None) -> bytes:
    body = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"


def usage_chunk(model: str, created: int, prompt: int, completion: int, cached: int = 0) -> bytes:
    usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    if cached:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    body = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": [], "usage": usage}
    return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"


def http_chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _text(message: dict) -> str:
    """A message's text, whether its content is a string or a list of parts."""
    content = message.get("content")
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) if isinstance(part, dict) else str(part) for part in content)
    return str(content or "")


def _words(message: dict) -> int:
    return len(_text(message).split())


def _digest(message: dict) -> bytes:
    return hashlib.blake2b(json.dumps([message.get("role"), _text(message)]).encode(), digest_size=16).digest()


def _tag(messages: list[dict]) -> str:
    """The first word of the first user message; "#first" added when it is
    the only one (a conversation's first turn)."""
    users = [m for m in messages if m.get("role") == "user"]
    words = _text(users[0]).split(maxsplit=1) if users else []
    return (words[0] if words else "") + ("#first" if len(users) == 1 else "")


class PrefixCache:
    """The last `size` conversations (their messages' digests and words):
    how much of a prompt is held, by whole messages."""

    def __init__(self, size: int):
        self.size = size
        self._held: OrderedDict[tuple, None] = OrderedDict()

    def read(self, messages: list[dict], reply: str) -> int:
        """The prompt's words found cached; then the prompt and its reply are held."""
        digests = [_digest(m) for m in messages]
        best, best_key = 0, None
        for key in self._held:
            common = next((i for i, (a, b) in enumerate(zip(key, digests)) if a != b), min(len(key), len(digests)))
            if common > best:
                best, best_key = common, key
        if best_key is not None:
            self._held.move_to_end(best_key)
        cached = sum(_words(m) for m in messages[:best])
        if self.size:
            self._held[tuple(digests) + (_digest({"role": "assistant", "content": reply}),)] = None
            while len(self._held) > self.size:
                self._held.popitem(last=False)
        return cached


class Upstream:
    def __init__(self, tokens: int, rate: float, capacity: int = 0, cache: int = 0):
        self.tokens = tokens
        self.interval = 1.0 / rate
        self._turns = asyncio.Semaphore(capacity) if capacity else None
        self.cache = PrefixCache(cache)
        self.served: dict[str, int] = {}
        self.at_once: dict[str, int] = {}
        self.most_at_once: dict[str, int] = {}
        self.work: dict[str, dict[str, int]] = {}  # per tag: read, cached, written, requests

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await self._one_request(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def _one_request(self, reader, writer) -> bool:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        if method == "GET" and path == "/stats":
            await self._json(writer, 200, {"served": self.served, "most_at_once": self.most_at_once,
                                           "work": self.work})
        elif method == "GET":
            await self._json(writer, 200, {"object": "list", "data": [
                {"id": name, "object": "model", "created": 0, "owned_by": "bench"}
                for name in ("paced", "instant", "work")]})
        elif path.endswith("/chat/completions"):
            await self._in_turn(writer, json.loads(body))
        else:
            await self._json(writer, 404, {"error": {"message": f"no route {path}"}})
        return headers.get("connection", "").lower() != "close"

    async def _json(self, writer, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        writer.write(b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                     % (status, len(data), data))
        await writer.drain()

    async def _in_turn(self, writer, request: dict) -> None:
        if self._turns is None:
            return await self._counted(writer, request)
        async with self._turns:
            await self._counted(writer, request)

    async def _counted(self, writer, request: dict) -> None:
        model = request.get("model", "paced")
        self.served[model] = self.served.get(model, 0) + 1
        self.at_once[model] = self.at_once.get(model, 0) + 1
        self.most_at_once[model] = max(self.most_at_once.get(model, 0), self.at_once[model])
        try:
            await self._completion(writer, request)
        finally:
            self.at_once[model] -= 1

    def _tally(self, messages: list[dict], prompt_tokens: int, count: int) -> int:
        """The prompt's words read from the cache; the work counted under its tag."""
        cached = self.cache.read(messages, " ".join([WORD] * count))
        work = self.work.setdefault(_tag(messages), {"read": 0, "cached": 0, "cacheable": 0, "written": 0,
                                                     "requests": 0})
        work["read"] += prompt_tokens - cached
        work["cached"] += cached
        work["cacheable"] += prompt_tokens - (_words(messages[-1]) if messages else 0)  # all but the new message
        work["written"] += count
        work["requests"] += 1
        return cached

    async def _completion(self, writer, request: dict) -> None:
        model, created = request.get("model", "paced"), int(time.time())
        count = min(int(request.get("max_tokens") or self.tokens), self.tokens)
        prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in request.get("messages", []))
        if not request.get("stream"):
            return await self._json(writer, 200, {
                "id": "chatcmpl-bench", "object": "chat.completion", "created": created, "model": model,
                "choices": [{"index": 0, "finish_reason": "length" if count < self.tokens else "stop",
                             "message": {"role": "assistant", "content": " ".join([WORD] * count)}}],
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": count,
                          "total_tokens": prompt_tokens + count}})
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        writer.write(http_chunk(chunk(model, created, {"role": "assistant", "content": ""})))
        await writer.drain()
        paced, cached = model != "instant", 0
        if model == "work":
            cached = self._tally(request.get("messages", []), prompt_tokens, count)
            await asyncio.sleep((prompt_tokens - cached) * self.interval)  # reading the prompt
        for index in range(count):
            if paced:
                await asyncio.sleep(self.interval)
            writer.write(http_chunk(chunk(model, created, {"content": WORD if index == 0 else " " + WORD})))
            if paced:
                await writer.drain()
        tail = chunk(model, created, {}, "stop")
        if (request.get("stream_options") or {}).get("include_usage"):
            tail += usage_chunk(model, created, prompt_tokens, count, cached)
        writer.write(http_chunk(tail + b"data: [DONE]\n\n") + b"0\r\n\r\n")
        await writer.drain()


async def serve(port: int, tokens: int, rate: float, capacity: int = 0, cache: int = 0) -> None:
    upstream = Upstream(tokens, rate, capacity, cache)
    server = await asyncio.start_server(upstream.handle, "127.0.0.1", port, backlog=2048)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--tokens", type=int, default=64, help="tokens per reply")
    parser.add_argument("--rate", type=float, default=200.0, help='tokens per second for model "paced"')
    parser.add_argument("--capacity", type=int, default=0, help="requests answered at once (0: no bound)")
    parser.add_argument("--cache", type=int, default=0, help='conversations whose prefix "work" keeps (0: none)')
    args = parser.parse_args()
    asyncio.run(serve(args.port, args.tokens, args.rate, args.capacity, args.cache))


if __name__ == "__main__":
    main()
