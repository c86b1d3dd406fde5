"""Tool definitions and calls, in the shape the OpenAI and Ollama APIs share,
and freeform (custom) tools, which OpenAI's two APIs accept.

A custom tool takes one free text (Codex's and Copilot's `apply_patch` take
a patch in a Lark grammar). Towards a model it is a function of one string
parameter `input`, whose description carries the grammar; its call's
arguments are `{"input": "<the text>"}` until a writer turns the call back
into the client's custom call. Only an upstream that takes custom tools
(`custom_tools = true` on an `openai` model) is sent them as such.
"""
from __future__ import annotations

import json

from dialects.common import Tool
from protocol.contract import ToolSpec, json_object

_INPUT = "the tool's whole input, as free text (not JSON)"


def custom_tool_spec(name: str, description: str = "", format: dict | None = None) -> ToolSpec:
    """A custom tool as the job carries it: `format` is OpenAI's tool format
    flattened (the Responses shape: type, syntax, definition)."""
    return ToolSpec(name=name, description=description, kind="custom", format=format,
                    parameters={"type": "object", "properties": {"input": {
                        "type": "string", "description": _input_description(format)}}, "required": ["input"]})


def _input_description(format: dict | None) -> str:
    """What the model is told of the input when the grammar cannot be
    enforced: the grammar itself, which a model reads well enough."""
    if not format or format.get("type") != "grammar" or not format.get("definition"):
        return _INPUT
    return f"{_INPUT}; it must follow this {format.get('syntax') or 'lark'} grammar:\n{format['definition']}"


def custom_arguments(text: str) -> str:
    """A custom call's input as the arguments a model's call carries."""
    return json.dumps({"input": text}, ensure_ascii=False)


def custom_input(arguments: str) -> str:
    """The text of a custom call, from the arguments a model wrote: its
    `input`; a model that named the one parameter otherwise, or wrote no
    JSON object, still called the tool, with what it wrote."""
    value = json_object(arguments)
    if isinstance(value.get("input"), str):
        return value["input"]
    if len(value) == 1 and isinstance(only := next(iter(value.values())), str):
        return only
    return "" if arguments.strip() in ("", "{}") else arguments


def custom_tool_names(tools: list[ToolSpec]) -> frozenset[str]:
    return frozenset(t.name for t in tools if t.kind == "custom")


def to_tool_specs(tools: list[Tool] | None) -> list[ToolSpec]:
    """A client's tool definitions into the job's."""
    return [
        ToolSpec(name=t.function.name, description=t.function.description or "", parameters=t.function.parameters or {})
        for t in tools or []
    ]


def tool_definitions(tools: list[ToolSpec], custom: bool = False) -> list[dict]:
    """The job's tools as an upstream expects them (OpenAI's shape, which
    Ollama shares); with `custom`, custom tools in OpenAI's custom shape."""
    return [_custom_definition(t) if custom and t.kind == "custom" else {"type": "function", "function": {
        "name": t.name, "description": t.description, "parameters": t.parameters or {"type": "object"}}}
        for t in tools]


def _custom_definition(tool: ToolSpec) -> dict:
    """Chat Completions' custom tool: the grammar nested as OpenAI nests it."""
    definition: dict = {"name": tool.name, "description": tool.description}
    if tool.format and tool.format.get("type") == "grammar":
        definition["format"] = {"type": "grammar", "grammar": {
            "syntax": tool.format.get("syntax") or "lark", "definition": tool.format.get("definition", "")}}
    elif tool.format:
        definition["format"] = {"type": "text"}
    return {"type": "custom", "custom": definition}


def arguments_text(arguments: str | dict) -> str:
    """Arguments as JSON text: OpenAI sends text, Ollama an object."""
    if isinstance(arguments, dict):
        return json.dumps(arguments, ensure_ascii=False)
    return arguments or "{}"
