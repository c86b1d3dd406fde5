"""Tool definitions and calls, in the shape the OpenAI and Ollama APIs share."""
from __future__ import annotations

import json

from dialects.common import Tool
from protocol.contract import ToolSpec


def to_tool_specs(tools: list[Tool] | None) -> list[ToolSpec]:
    """A client's tool definitions into the job's."""
    return [
        ToolSpec(name=t.function.name, description=t.function.description or "", parameters=t.function.parameters or {})
        for t in tools or []
    ]


def tool_definitions(tools: list[ToolSpec]) -> list[dict]:
    """The job's tools as an upstream expects them (OpenAI's shape, which Ollama shares)."""
    return [{"type": "function", "function": {
        "name": t.name, "description": t.description, "parameters": t.parameters or {"type": "object"}}}
        for t in tools]


def arguments_text(arguments: str | dict) -> str:
    """Arguments as JSON text: OpenAI sends text, Ollama an object."""
    if isinstance(arguments, dict):
        return json.dumps(arguments, ensure_ascii=False)
    return arguments or "{}"
