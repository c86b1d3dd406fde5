"""A model round's pieces -> the events the client gets: thinking (an
upstream's, or a local model's text between its think tags) apart, the rest
through the tool-call filter and the server-tool rounds' text pass."""
from __future__ import annotations

from protocol.events import RedactedThinkingEvent, ThinkingEvent
from workers.model_output import RedactedThinking, Thinking
from workers.server_tools import ServerTools
from workers.thinking import ThinkSplitter
from workers.toolcalls.emulation import ReplyFilter


class Replies:
    """A round's pieces -> events: thinking apart (split out of the text by
    the model's think tags, if it has them; dropped if the job said think
    false), the rest through the tool-call filter."""

    def __init__(self, filter: ReplyFilter, server: ServerTools, think_tags: tuple[str, str] | None, think):
        self.filter, self._server, self._think = filter, server, think
        self._splitter = ThinkSplitter(*think_tags) if think_tags else None
        self.thinking = ""  # the round's thinking, shown or not: its tokens count as reasoning

    def feed(self, piece) -> list:
        if self._splitter is None and isinstance(piece, str):  # the usual piece: no detour
            return self._server.shown(self.filter.feed(piece))
        items = self._splitter.feed(piece) if self._splitter is not None and isinstance(piece, str) else [piece]
        return self._events(items)

    def finish(self) -> list:
        return self._events(self._splitter.finish() if self._splitter else []) + \
            self._server.shown(self.filter.finish())

    def _events(self, items: list) -> list:
        events = []
        for item in items:
            if isinstance(item, Thinking):
                self.thinking += item.text
                if self._think is not False:
                    events.append(ThinkingEvent(text=item.text, signature=item.signature))
            elif isinstance(item, RedactedThinking):
                if self._think is not False:
                    events.append(RedactedThinkingEvent(data=item.data))
            else:
                events += self._server.shown(self.filter.feed(item))
        return events
