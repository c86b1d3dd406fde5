"""The JSON payloads of an upstream's SSE stream (OpenAI's and Anthropic's
shapes alike: `data:` lines; `event:` lines, comments and blank lines
skipped)."""
from __future__ import annotations

from typing import Iterator

from protocol.errors import BackendError
from workers.backends import wire_json


def sse_payloads(arrivals: Iterator[list[str]]) -> Iterator[list[dict]]:
    """The JSON payloads of an SSE stream, as many at a time as arrived
    together, up to `data: [DONE]`; comments, `event:` lines and blank
    lines are skipped."""
    for lines in arrivals:
        payloads = []
        for line in lines:
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                yield payloads
                _read_to_end(arrivals)
                return
            if data:
                payloads.append(wire_json.loads(data))
        yield payloads


def _read_to_end(arrivals: Iterator[list[str]]) -> None:
    """Read the body to its end, normally just the closing chunk: a
    connection whose body was left unread is closed, and a new connection per
    job (TCP handshake, gevent's resolver thread) costs about a millisecond."""
    try:
        for _ in arrivals:
            pass
    except BackendError:  # an upstream that never ends its body: the reply is complete anyway
        pass
