"""How deeply a client's JSON nests, counted without recursion: every API
refuses a body deeper than any real request needs (10,000 levels overflow
the parser; a few hundred overflow the queue's encoder, or an MCP server's
own parser) before any work is done."""
from __future__ import annotations

MAX_DEPTH = 64  # Copilot's agent requests nest 8 levels deep; an MCP tool call's arguments, a few


def nodes(value):
    """Every value inside, with its nesting level (iteratively: no recursion limit)."""
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        yield item, level
        if isinstance(item, dict):
            stack.extend((child, level + 1) for pair in item.items() for child in pair)
        elif isinstance(item, list):
            stack.extend((child, level + 1) for child in item)


def depth(value) -> int:
    """How deeply lists and objects nest (stops counting past MAX_DEPTH)."""
    deepest = 0
    for item, level in nodes(value):
        if isinstance(item, (dict, list)) and level > deepest:
            deepest = level
            if deepest > MAX_DEPTH:
                break
    return deepest
