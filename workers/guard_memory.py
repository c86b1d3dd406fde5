"""What a worker process remembers of the texts the guard scanned: per
person and text (the text itself is the key: agents resend each message
unchanged, and a dict compares it in one pass), its findings and, for the
person's known values at the time, its redacted form. Bounded by the
characters it holds; the oldest go first. Redis keeps the findings for
every worker (workers/secrets_guard.py); this spares a turn the digests,
the round trip and the replacing of what it sent before."""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable

from guard.finding import Finding

MOST_CHARACTERS = 8_000_000  # about 8-32 MB of text, some hundreds of conversations' messages


@dataclass
class Remembered:
    findings: list[Finding]
    values: object = None  # the known values' version its redacted form was made with
    redacted: str | None = None


class TextMemory:
    def __init__(self, most: int = MOST_CHARACTERS):
        self.entries: OrderedDict[tuple[str, str], Remembered] = OrderedDict()
        self.most, self.held = most, 0

    def get(self, person: str, text: str) -> Remembered | None:
        entry = self.entries.get((person, text))
        if entry is not None:
            self.entries.move_to_end((person, text))
        return entry

    def put(self, person: str, text: str, findings: list[Finding]) -> None:
        if (person, text) not in self.entries:
            self.held += len(text)
        self.entries[(person, text)] = Remembered(findings)
        while self.held > self.most and len(self.entries) > 1:
            (_, old), _ = self.entries.popitem(last=False)
            self.held -= len(old)

    def clear(self) -> None:
        self.entries.clear()
        self.held = 0

    def redacting(self, person: str, values: object, change: Callable[[str], str]) -> Callable[[str], str]:
        """`change` (a text -> its redacted form), remembered per text for these known values."""
        def redacted(text: str) -> str:
            entry = self.entries.get((person, text))
            if entry is None:
                return change(text)
            if entry.values != values:
                new = change(text)
                entry.values, entry.redacted = values, None if new is text else new
            return text if entry.redacted is None else entry.redacted
        return redacted
