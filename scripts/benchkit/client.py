"""The benchmark's load client: streaming HTTP/1.1 requests on raw asyncio
streams, timed from the request's first byte sent.

A raw client, not httpx or the openai SDK, so that the client costs the same
small amount against every contender and can hold a thousand streams on one
core. It understands chunked and length-delimited bodies and both stream
framings (SSE `data:` lines and NDJSON), and reads the text out of OpenAI
chunks and Ollama lines. Until the first text arrives it parses every frame
(that is the time to first token); after that it only collects bytes and
parses them once the stream ended, so parsing never slows the stream down.
"""
from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field


@dataclass
class StreamResult:
    status: int = 0
    ttft: float | None = None  # seconds from sending the request to the first text
    total: float = 0.0  # seconds from sending the request to the end of the body
    text: str = ""
    frames: int = 0  # SSE events or NDJSON lines carrying data
    text_frames: int = 0  # ...of which carry text
    completion_tokens: int | None = None  # as the server's usage reports them
    usage: dict = field(default_factory=dict)  # Anthropic's usage fields, message_start's then message_delta's
    headers: dict = field(default_factory=dict)
    error: str | None = None
    sent_at: float = 0.0  # wall clock (time.time()) when the request was sent, to compare with Redis records


def request_bytes(path: str, body: dict, headers: dict | None = None) -> bytes:
    data = json.dumps(body).encode()
    extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\nConnection: close\r\n{extra}\r\n").encode() + data


def frame_payloads(raw: bytes) -> list[dict]:
    """The JSON objects of an SSE or NDJSON body (SSE comments, blank lines
    and the [DONE] sentinel skipped)."""
    payloads = []
    for line in raw.split(b"\n"):
        line = line.strip()
        if line.startswith(b"data:"):
            line = line[5:].strip()
        if not line or line.startswith(b":") or line == b"[DONE]" or not line.startswith(b"{"):
            continue
        payloads.append(json.loads(line))
    return payloads


def text_of(payload: dict) -> str:
    """The text a frame carries: OpenAI chat/completions chunks, Anthropic's
    text deltas, Gemini's responses, Ollama chat/generate lines, and the
    simple chat API's lines."""
    kind = payload.get("type") or ""
    if "candidates" in payload:  # the Gemini API's (its thoughts are not the answer)
        parts = ((payload["candidates"] or [{}])[0].get("content") or {}).get("parts") or []
        return "".join(part.get("text") or "" for part in parts if not part.get("thought"))
    if kind == "content_block_delta":
        return payload["delta"].get("text") or ""
    if kind == "message":  # Anthropic's whole reply
        return "".join(block.get("text") or "" for block in payload.get("content") or [] if block.get("type") == "text")
    if payload.get("object") == "response":  # OpenAI's whole Response
        return "".join(part.get("text") or "" for item in payload.get("output") or []
                       for part in item.get("content") or [] if part.get("type") == "output_text")
    if kind.startswith("response."):  # OpenAI's Responses (its `response` is no Ollama text)
        return payload["delta"] if kind == "response.output_text.delta" else ""
    choices = payload.get("choices")
    if choices:
        choice = choices[0]
        whole = choice.get("message") or {}  # (a whole chat completion's)
        return (choice.get("delta") or {}).get("content") or whole.get("content") or choice.get("text") or ""
    message = payload.get("message")
    if isinstance(message, dict):
        return message.get("content") or ""
    return payload.get("response") or payload.get("content") or ""


def tokens_of(payload: dict) -> int | None:
    usage = payload.get("usage")
    if isinstance(usage, dict) and "completion_tokens" in usage:
        return usage["completion_tokens"]
    if payload.get("type") == "message_delta":  # Anthropic's cumulative usage
        return usage.get("output_tokens")
    if payload.get("type") in ("response.completed", "response.incomplete"):
        return ((payload["response"].get("usage")) or {}).get("output_tokens")
    if payload.get("type") == "message" or payload.get("object") == "response":  # whole replies'
        return (usage or {}).get("output_tokens")
    if isinstance(payload.get("usageMetadata"), dict):  # the Gemini API's
        return payload["usageMetadata"].get("candidatesTokenCount")
    return payload.get("eval_count")


class _Body:
    """Reads a response body piece by piece, chunked or not."""

    def __init__(self, reader: asyncio.StreamReader, headers: dict):
        self._reader = reader
        self._chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        self._left = int(headers["content-length"]) if "content-length" in headers else None
        self.done = False

    async def next(self) -> bytes:
        if self._chunked:
            size = int((await self._reader.readline()).split(b";")[0], 16)
            if size == 0:
                self.done = True
                return b""
            data = await self._reader.readexactly(size + 2)
            return data[:-2]
        data = await self._reader.read(65536 if self._left is None else min(self._left, 65536))
        if self._left is not None:
            self._left -= len(data)
        self.done = not data or self._left == 0
        return data


async def read_head(reader: asyncio.StreamReader) -> tuple[int, dict]:
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
    status = int(head[0].split(" ", 2)[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in head[1:] if line)}
    return status, headers


async def stream(port: int, path: str, body: dict, headers: dict | None = None) -> StreamResult:
    """One request, read to its end."""
    result = StreamResult()
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 20)
    started, result.sent_at = time.perf_counter(), time.time()
    try:
        writer.write(request_bytes(path, body, headers))
        result.status, result.headers = await read_head(reader)
        raw = await _read_body(_Body(reader, result.headers), started, result)
    except (ConnectionError, asyncio.IncompleteReadError, ValueError) as error:
        result.error = f"{type(error).__name__}: {error}"
        return result
    finally:
        writer.close()
    result.total = time.perf_counter() - started
    _summarize(raw, result)
    return result


async def _read_body(body: _Body, started: float, result: StreamResult) -> bytes:
    pieces, pending = [], b""
    while not body.done:
        piece = await body.next()
        pieces.append(piece)
        if result.ttft is None:
            pending += piece
            lines = pending.split(b"\n")
            pending = lines.pop()
            if any(text_of(p) for p in frame_payloads(b"\n".join(lines))):
                result.ttft = time.perf_counter() - started
    return b"".join(pieces)


def _summarize(raw: bytes, result: StreamResult) -> None:
    if result.status != 200:
        result.error = f"HTTP {result.status}: {raw[:300]!r}"
        return
    try:
        payloads = frame_payloads(raw)
    except ValueError as error:
        result.error = f"unparseable frame: {error}"
        return
    result.frames = len(payloads)
    texts = [text_of(p) for p in payloads]
    result.text, result.text_frames = "".join(texts), sum(1 for t in texts if t)
    for payload in payloads:
        if payload.get("error") is not None:  # (a whole Response says "error": null)
            result.error = str(payload["error"])[:300]
        tokens = tokens_of(payload)
        if tokens is not None:
            result.completion_tokens = tokens
        if payload.get("type") in ("message_start", "message_delta"):
            result.usage.update((payload.get("message") or payload).get("usage") or {})


async def open_stream(port: int, path: str, body: dict, until_text: bool) -> tuple[asyncio.StreamWriter, dict]:
    """Send a streaming request and return once the response headers (or,
    with until_text, the first text) arrived; the caller closes the socket.
    Also returns the parsed first frames, whose ids name the job."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request_bytes(path, body))
    status, headers = await read_head(reader)
    if status != 200:
        writer.close()
        raise RuntimeError(f"HTTP {status}")
    first: dict = {}
    body_reader, seen = _Body(reader, headers), b""
    while until_text and not first:
        seen += await body_reader.next()
        first = next((p for p in frame_payloads(seen[:seen.rfind(b"\n") + 1]) if text_of(p)), {})
    return writer, {"headers": headers, "first": first}
