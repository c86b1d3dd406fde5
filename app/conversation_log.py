"""Opt-in conversation logs for debugging agent behaviour: one JSON line per
exchange (request body, reply text, tool calls, outcome) in a data folder,
one file per day. Secrets are redacted: headers are never written, and body
fields that look like credentials are masked."""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Iterator

from workers.contract import DoneEvent, ErrorEvent, Event, TextEvent, ToolCallEvent

_SECRET_FIELDS = ("key", "token", "secret", "password", "authorization")


def redact(value):
    if isinstance(value, dict):
        return {k: "[redacted]" if any(s in k.lower() for s in _SECRET_FIELDS) else redact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value


def logged(events: Iterator[Event], folder: Path, exchange: dict) -> Iterator[Event]:
    """Pass the events through; write the exchange when it ends."""
    texts, calls, outcome = [], [], "client gone"
    try:
        for event in events:
            if isinstance(event, TextEvent):
                texts.append(event.text)
            elif isinstance(event, ToolCallEvent):
                calls.append({"name": event.name, "arguments": event.arguments})
            elif isinstance(event, DoneEvent):
                outcome = event.reason
            elif isinstance(event, ErrorEvent):
                outcome = f"error: {event.message}"
            yield event
    finally:
        record = exchange | {"request": redact(exchange.get("request")), "reply": "".join(texts),
                             "tool_calls": calls, "outcome": outcome, "time": time.time()}
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / f"conversations-{time.strftime('%Y-%m-%d')}.jsonl", "a", encoding="utf-8") as file:
            file.write(json.dumps(record, ensure_ascii=False) + "\n")
