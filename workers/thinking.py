"""Reasoning written between tags (`<think>...</think>`) in a local model's
streamed text, split out as Thinking pieces.

Like the tool-call parser, it holds back what may still turn into a tag (a
partial `<think` or `</think` at the end of what it has seen) and decides
it with the next piece; `finish()` releases the rest.
"""
from __future__ import annotations

from workers.model_output import Thinking


def _partial_tag_length(text: str, tag: str) -> int:
    """How many characters at the end of `text` could begin `tag`."""
    for n in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:n]):
            return n
    return 0


class ThinkSplitter:
    def __init__(self, open_tag: str, close_tag: str):
        self._tags = {False: open_tag, True: close_tag}  # the tag that ends the current mode
        self._thinking = False
        self._held = ""

    def _piece(self, text: str) -> list:
        if not text:
            return []
        return [Thinking(text)] if self._thinking else [text]

    def feed(self, text: str) -> list:
        buffer, pieces = self._held + text, []
        while True:
            tag = self._tags[self._thinking]
            at = buffer.find(tag)
            if at < 0:
                break
            pieces += self._piece(buffer[:at])
            buffer, self._thinking = buffer[at + len(tag):], not self._thinking
        keep = _partial_tag_length(buffer, self._tags[self._thinking])
        self._held = buffer[len(buffer) - keep:] if keep else ""
        return pieces + self._piece(buffer[:len(buffer) - keep])

    def finish(self) -> list:
        held, self._held = self._held, ""
        return self._piece(held)
