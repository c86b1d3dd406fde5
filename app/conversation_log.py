"""Opt-in conversation logs for debugging agent behaviour: one JSON line per
exchange (request body, reply text, tool calls, outcome) in a data folder,
one file per day. An observer of the frame loop (app/streaming.py), written
when the request closes. Secrets are redacted: headers are never written,
body fields that look like credentials are masked, and what the guard
finds in any text (guard/detect.py: keys, private keys, passwords) is
replaced by its kind, in the request, the reply and its tool calls."""
from __future__ import annotations

import json
import time
from pathlib import Path

from protocol.events import DoneEvent, ErrorEvent, Event, ServerToolEvent, TextEvent, ToolCallEvent

_SECRET_FIELDS = ("key", "token", "secret", "password", "authorization")


def redact(value):
    if isinstance(value, dict):
        return {k: "[redacted]" if any(s in k.lower() for s in _SECRET_FIELDS) else redact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    return masked(value) if isinstance(value, str) else value


def masked(text: str) -> str:
    """The text with each secret the guard finds in it replaced by `[secret: <kind>]`."""
    from guard.detect import find  # (loaded only where bodies are kept: the web process stays lean)
    parts, at = [], 0
    for finding in find(text):
        parts += [text[at:finding.start], f"[secret: {finding.kind}]"]
        at = finding.end
    return "".join(parts) + text[at:] if parts else text


class ConversationLog:
    """Sees every event of one exchange; writes it once, on close."""

    def __init__(self, folder: Path, exchange: dict):
        self._folder, self._exchange = folder, exchange
        self._texts: list[str] = []
        self._calls: list[dict] = []
        self._server_tools: list[dict] = []
        self._outcome = "client gone"

    def __call__(self, event: Event) -> None:
        if isinstance(event, TextEvent):
            self._texts.append(event.text)
        elif isinstance(event, ToolCallEvent):
            self._calls.append({"name": event.name, "arguments": event.arguments})
        elif isinstance(event, ServerToolEvent) and event.phase == "result":
            self._server_tools.append(event.summary())
        elif isinstance(event, DoneEvent):
            self._outcome = event.reason
        elif isinstance(event, ErrorEvent):
            self._outcome = f"error: {event.message}"

    def close(self) -> None:
        record = self._exchange | {"request": redact(self._exchange.get("request")),
                                   "reply": masked("".join(self._texts)), "tool_calls": redact(self._calls),
                                   "server_tools": self._server_tools, "outcome": self._outcome, "time": time.time()}
        self._folder.mkdir(parents=True, exist_ok=True)
        with open(self._folder / f"conversations-{time.strftime('%Y-%m-%d')}.jsonl", "a", encoding="utf-8") as file:
            file.write(json.dumps(record, ensure_ascii=False) + "\n")
