"""Incremental parser of tool calls in streamed model text.

`feed(text)` returns what can be decided so far: plain text (released at
once) and complete calls; text that may still turn into a call (a partial
`<invoke` at the end of the buffer, an open block) is held until it is known.
`finish()` decides the rest. Formats, for models that ignore the asked one:

1. `<invoke name="T"><parameter name="A">value</parameter></invoke>` (asked for;
   values literal; `final_answer` becomes plain text)
2. `<tool_call>{"name": "T", "arguments": {...}}</tool_call>` (Hermes, Qwen)
3. a bare or fenced JSON object `{"name": "T", "arguments": {...}}`

Only declared tools count; anything else is left as text, byte for byte.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Callable, Union

FINAL_ANSWER = "final_answer"
_HEADER = re.compile(r'<invoke\s+name\s*=\s*"([^"]*)"\s*>')
_PARAMETER = re.compile(r'<parameter\s+name\s*=\s*"([^"]*)"\s*>')
_JSON_START = re.compile(r'\{\s*"(name|arguments)"')
# What may still become _JSON_START with more text.
_BARE_JSON_START = re.compile(r'\{\s*("(n(a(m(e)?)?)?|a(r(g(u(m(e(n(t(s)?)?)?)?)?)?)?)?)?)?')
_FENCE_HEADER = re.compile(r"```(?:json)?[ \t]*\n")
_STARTS = ("<invoke", "<tool_call>", "```", "{")
_MAX_HELD = 256 * 1024  # beyond this, an unfinished block is given up as text


@dataclass
class ParsedCall:
    name: str
    arguments: dict = field(default_factory=dict)


Item = Union[str, ParsedCall]


@dataclass
class _Result:
    """Of trying one format at the start of the buffer: `consumed` chars
    make `items`; `items is None` means "not a call: release `consumed`
    chars as text"; `consumed == 0` means "need more text"."""

    consumed: int
    items: list[Item] | None = None


NEED_MORE = _Result(0)


def _not_a_call(length: int) -> _Result:
    return _Result(length, None)


class ToolCallParser:
    def __init__(self, tool_names: set[str]):
        self._tools = tool_names
        self._buffer = ""
        self.malformed = False  # a call of a declared tool began that could not be read (left as text)
        self._formats: dict[str, Callable[[str, bool], _Result]] = {
            "<invoke": self._invoke, "<tool_call>": self._tagged_json, "```": self._fenced_json, "{": self._bare_json,
        }

    def feed(self, text: str) -> list[Item]:
        self._buffer += text
        return self._drain(final=False)

    def finish(self) -> list[Item]:
        return self._drain(final=True)

    def _drain(self, final: bool) -> list[Item]:
        items: list[Item] = []
        while self._buffer:
            start, kind = _next_start(self._buffer)
            if kind is None:
                keep = 0 if final else _partial_start_length(self._buffer)
                self._release(len(self._buffer) - keep, items)
                break
            self._release(start, items)
            result = self._formats[kind](self._buffer, final)
            if result.consumed == 0:
                if not final and len(self._buffer) < _MAX_HELD:
                    break
                result = _not_a_call(len(kind))
            if result.items is None:
                self._release(result.consumed, items)
            else:
                items.extend(result.items)
                self._buffer = self._buffer[result.consumed:]
        return merge_text(items)

    def _release(self, length: int, items: list[Item]) -> None:
        if length > 0:
            items.append(self._buffer[:length])
            self._buffer = self._buffer[length:]

    # Format 1: <invoke name="T"><parameter name="A">v</parameter></invoke>
    def _invoke(self, buffer: str, final: bool) -> _Result:
        header = _HEADER.match(buffer)
        if header is None:
            return NEED_MORE if ">" not in buffer and not final else _not_a_call(len("<invoke"))
        name = header.group(1)
        if name not in self._tools and name != FINAL_ANSWER:
            return _not_a_call(header.end())
        arguments, end = _invoke_body(buffer, header.end(), final)
        if end == 0:
            self.malformed = self.malformed or (final and name != FINAL_ANSWER)  # its reply ended inside it
            return NEED_MORE
        if name == FINAL_ANSWER:
            answer = arguments.get("answer", "")
            return _Result(end, [answer] if answer else [])
        return _Result(end, [ParsedCall(name, arguments)])

    # Format 2: <tool_call>{json}</tool_call>
    def _tagged_json(self, buffer: str, final: bool) -> _Result:
        close = buffer.find("</tool_call>")
        if close < 0:
            return NEED_MORE if not final else _not_a_call(len("<tool_call>"))
        call = self._call_from_json(buffer[len("<tool_call>"):close].strip())
        end = close + len("</tool_call>")
        return _Result(end, [call]) if call else _not_a_call(end)

    # Format 3a: ```json\n{...}\n```
    def _fenced_json(self, buffer: str, final: bool) -> _Result:
        header = _FENCE_HEADER.match(buffer)
        if header is None:
            return NEED_MORE if "\n" not in buffer and len(buffer) < 16 and not final else _not_a_call(3)
        body_start = len(buffer) - len(buffer[header.end():].lstrip())
        if body_start == len(buffer):
            return NEED_MORE if not final else _not_a_call(3)
        inner = self._bare_json(buffer[body_start:], final)
        if inner.consumed == 0 or inner.items is None:
            return inner if inner.consumed == 0 else _not_a_call(3)
        rest = buffer[body_start + inner.consumed:]
        stripped = rest.lstrip()
        if len(stripped) < 3:
            return NEED_MORE if not final else _not_a_call(3)
        if not stripped.startswith("```"):
            return _not_a_call(3)
        return _Result(len(buffer) - len(stripped) + 3, inner.items)

    # Format 3b: {"name": "T", "arguments": {...}}
    def _bare_json(self, buffer: str, final: bool) -> _Result:
        if not _JSON_START.match(buffer):
            could_still_match = bool(_BARE_JSON_START.fullmatch(buffer))
            return NEED_MORE if could_still_match and not final else _not_a_call(1)
        end = _json_object_end(buffer)
        if end == 0:
            return NEED_MORE if not final else _not_a_call(1)
        call = self._call_from_json(buffer[:end])
        return _Result(end, [call]) if call else _not_a_call(1)

    def _call_from_json(self, text: str) -> ParsedCall | None:
        try:
            obj = json.loads(text)
        except ValueError:
            return None
        if not isinstance(obj, dict) or obj.get("name") not in self._tools:
            return None
        arguments = obj.get("arguments", obj.get("parameters", {}))
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except ValueError:
                return None
        return ParsedCall(obj["name"], arguments) if isinstance(arguments, dict) else None


def _next_start(buffer: str) -> tuple[int, str | None]:
    found = [(i, s) for s in _STARTS if (i := buffer.find(s)) >= 0]
    return min(found) if found else (len(buffer), None)


def _partial_start_length(buffer: str) -> int:
    """Length of the longest end of the buffer that could begin a block."""
    for length in range(min(len(buffer), max(map(len, _STARTS)) - 1), 0, -1):
        tail = buffer[-length:]
        if any(start.startswith(tail) for start in _STARTS):
            return length
    return 0


def _invoke_body(buffer: str, position: int, final: bool) -> tuple[dict[str, str], int]:
    """Parameters from `position` to `</invoke>`; end 0 if not complete yet.
    Parameters are read in order, so a value may contain `</invoke>`. At the
    end of the reply a missing `</invoke>` is forgiven, an unclosed
    parameter is not (a truncated argument must not become a call)."""
    arguments: dict[str, str] = {}
    while True:
        rest = buffer[position:]
        position += len(rest) - len(rest.lstrip())
        rest = rest.lstrip()
        if rest.startswith("</invoke>"):
            return arguments, position + len("</invoke>")
        parameter = _PARAMETER.match(rest)
        if parameter is not None:
            value_start = position + parameter.end()
            close = buffer.find("</parameter>", value_start)
            if close < 0:
                return arguments, 0
            arguments[parameter.group(1)] = _block_value(buffer[value_start:close])
            position = close + len("</parameter>")
            continue
        # Not a parameter (yet): skip stray text up to the next tag, or wait.
        next_tag = min((i for i in (rest.find("<parameter"), rest.find("</invoke>")) if i > 0), default=-1)
        if next_tag > 0:
            position += next_tag
        elif final and not rest.startswith("<parameter"):
            return arguments, len(buffer)
        else:
            return arguments, 0


def _block_value(value: str) -> str:
    """A value written on its own lines (`>\\nvalue\\n<`) loses those two
    line breaks; everything else is literal."""
    if value.startswith("\n") and value.endswith("\n") and len(value) >= 2:
        return value[1:-1]
    return value


def _json_object_end(text: str) -> int:
    """Index just past the JSON object starting at text[0], or 0 if open."""
    depth, in_string, escaped = 0, False, False
    for i, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
    return 0


def merge_text(items: list[Item]) -> list[Item]:
    """Join adjacent text items and drop empty ones."""
    merged: list[Item] = []
    for item in items:
        if isinstance(item, str) and merged and isinstance(merged[-1], str):
            merged[-1] += item
        elif item != "":
            merged.append(item)
    return merged
