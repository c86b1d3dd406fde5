"""Stop sequences over streamed text.

Text that could still be the start of a stop sequence is held back until the
next piece tells whether it is; text from a stop sequence on is never emitted.
"""
from __future__ import annotations


class StopMatcher:
    def __init__(self, stops: list[str]):
        self._stops = [s for s in stops if s]
        self._held = ""
        self.stopped = False
        self.matched: str | None = None  # the stop sequence that ended the text

    def feed(self, text: str) -> str:
        """Return the text that is safe to emit; sets `stopped` on a match."""
        if self.stopped:
            return ""
        if not self._stops:  # the usual case, once per token
            return text
        buffer = self._held + text
        match = self._first_match(buffer)
        if match is not None:
            cut, self.matched = match
            self.stopped = True
            self._held = ""
            return buffer[:cut]
        keep = self._partial_suffix_length(buffer)
        self._held = buffer[len(buffer) - keep:] if keep else ""
        return buffer[: len(buffer) - keep]

    def flush(self) -> str:
        """At the end of generation, release what was held back."""
        held, self._held = self._held, ""
        return "" if self.stopped else held

    def _first_match(self, buffer: str) -> tuple[int, str] | None:
        """Where the earliest stop sequence starts, and which it is."""
        found = [(at, stop) for stop in self._stops if (at := buffer.find(stop)) >= 0]
        return min(found, key=lambda match: match[0]) if found else None

    def _partial_suffix_length(self, buffer: str) -> int:
        longest = 0
        for stop in self._stops:
            for n in range(min(len(stop) - 1, len(buffer)), longest, -1):
                if buffer.endswith(stop[:n]):
                    longest = n
                    break
        return longest
