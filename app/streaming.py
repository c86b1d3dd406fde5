"""Wire framing: SSE for the OpenAI routes, NDJSON for the Ollama routes.

SSE events are exactly `data: <json>\n\n` (LF only, no `event:` lines):
Copilot's parser splits on `\n` and the openai SDK on blank lines. NDJSON is
one object per line, every line ending in `\n` and no blank lines, because
the ollama client runs json.loads on every line.
"""
from __future__ import annotations

import json

SSE_DONE = b"data: [DONE]\n\n"
SSE_KEEPALIVE = b": keep-alive\n\n"  # a comment: every SSE parser skips it
SSE_CONTENT_TYPE = "text/event-stream"
NDJSON_CONTENT_TYPE = "application/x-ndjson"


def to_json(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def sse(obj) -> bytes:
    return b"data: " + to_json(obj) + b"\n\n"


def ndjson(obj) -> bytes:
    return to_json(obj) + b"\n"
