"""Tool definitions and calls from either dialect to the job's types."""
from __future__ import annotations

import json

from app.schemas.common import Tool
from workers.contract import ToolSpec


def to_tool_specs(tools: list[Tool] | None) -> list[ToolSpec]:
    return [
        ToolSpec(name=t.function.name, description=t.function.description or "", parameters=t.function.parameters or {})
        for t in tools or []
    ]


def arguments_text(arguments: str | dict) -> str:
    """Arguments as JSON text: OpenAI sends text, Ollama an object."""
    if isinstance(arguments, dict):
        return json.dumps(arguments, ensure_ascii=False)
    return arguments or "{}"
