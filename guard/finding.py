"""A secret found in a text: its kind and where it is (never its value, which
the text holds). Apart from guard/detect.py so that what only handles
findings (a worker's memory of them, redaction) does not load the
detectors (detect-secrets: some 20 MB a process) until a scan needs them."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Finding:
    kind: str
    start: int
    end: int

    def value(self, text: str) -> str:
        return text[self.start:self.end]
