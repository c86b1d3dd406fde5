"""Reassembling an upstream's streamed tool calls, whatever their shape.

Seen in the wild: whole calls in one chunk, pieces of several calls
interleaved, pieces without ids, every call at index 0 (told apart only by
a new id), arguments as an object instead of JSON text, a custom tool's
call with its text in `custom.input` (kept as the `{"input": ...}` a model
without custom tools writes). The rule: a piece
with an id not seen before starts a call; a piece without an id extends the
latest call at its index (or the latest call); a name is set once.
Calls come out whole at the end, and our front end streams them in the one
shape strict clients accept.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from dialects.tools import custom_arguments
from workers.model_output import NativeCall


@dataclass
class _Call:
    id: str | None
    name: str = ""
    arguments: list[str] = field(default_factory=list)
    custom: bool = False  # a custom (freeform) tool's call: the pieces are its text

    def arguments_text(self) -> str:
        text = "".join(self.arguments)
        return custom_arguments(text) if self.custom else text or "{}"


class ToolCallAssembler:
    def __init__(self):
        self._calls: list[_Call] = []
        self._by_id: dict[str, _Call] = {}
        self._by_index: dict[int, _Call] = {}

    def add(self, pieces: list[dict]) -> None:
        for piece in pieces:
            self._add(piece)

    def _add(self, piece: dict) -> None:
        call_id, index = piece.get("id") or None, piece.get("index")
        custom = piece.get("custom") if isinstance(piece.get("custom"), dict) else None
        function = piece.get("function") or custom or {}
        call = self._by_id.get(call_id) if call_id else None
        if call is None and call_id is None:
            call = self._by_index.get(index) if index is not None else (self._calls[-1] if self._calls else None)
        if call is None:
            call = _Call(call_id)
            self._calls.append(call)
            if call_id:
                self._by_id[call_id] = call
        if index is not None:
            self._by_index[index] = call
        if function.get("name") and not call.name:
            call.name = function["name"]
        call.custom = call.custom or custom is not None
        arguments = function.get("input" if custom is not None else "arguments")
        if isinstance(arguments, dict):
            call.arguments = [json.dumps(arguments, ensure_ascii=False)]
        elif arguments:
            call.arguments.append(arguments)

    def calls(self) -> list[NativeCall]:
        return [NativeCall(name=c.name, arguments=c.arguments_text(), id=c.id)
                for c in self._calls if c.name]
