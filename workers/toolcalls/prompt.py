"""The prompt side of emulated tool calling: instructions that describe the
tools, and the conversation's calls and results rewritten as plain text for
a model that has no tool roles."""
from __future__ import annotations

import json

from protocol.contract import Message, ToolCall, ToolChoice, ToolSpec

FORMAT = """To call a tool, answer with one or more blocks exactly like this, and nothing after them:
<invoke name="TOOL_NAME">
<parameter name="ARGUMENT_NAME">value</parameter>
</invoke>
Write values literally (no escaping); write objects and arrays as JSON.
Call tools only when you need them. When you have the answer, reply with plain text and no block."""

STEP_LIMIT_NOTE = ("You have used all the tool calls allowed for this request. "
                   "Do not call any tool: give your final answer now, from what you already know.")


def _describe(tool: ToolSpec) -> str:
    lines = [f"## {tool.name}"]
    if tool.description:
        lines.append(tool.description)
    if tool.kind == "custom":  # a freeform tool: its grammar as it is, not escaped inside a schema
        lines.append('Parameters: one, "input": the tool\'s whole input, as free text (not JSON).')
        grammar = (tool.format or {}).get("definition") if (tool.format or {}).get("type") == "grammar" else None
        if grammar:
            lines.append(f"The input must follow this {tool.format.get('syntax') or 'lark'} grammar:\n{grammar}")
    elif tool.parameters:
        lines.append("Parameters (JSON schema): " + json.dumps(tool.parameters, separators=(",", ":")))
    return "\n".join(lines)


def tool_instructions(tools: list[ToolSpec], choice: ToolChoice, parallel: bool = True) -> str:
    parts = ["# Tools", FORMAT]
    if choice.mode == "required":
        parts.append("You must call at least one tool in this reply.")
    elif choice.mode == "function":
        parts.append(f"You must call the tool {choice.name} in this reply.")
    if not parallel:
        parts.append("Call at most one tool in this reply.")
    parts.append("Available tools:\n\n" + "\n\n".join(_describe(t) for t in tools))
    return "\n\n".join(parts)


def render_call(call: ToolCall) -> str:
    """A call in the very format the model is asked to write."""
    try:
        arguments = json.loads(call.arguments or "{}")
    except ValueError:
        arguments = {"arguments": call.arguments}
    if not isinstance(arguments, dict):
        arguments = {"arguments": arguments}
    parameters = "".join(
        f'<parameter name="{name}">{value if isinstance(value, str) else json.dumps(value)}</parameter>\n'
        for name, value in arguments.items()
    )
    return f'<invoke name="{call.name}">\n{parameters}</invoke>'


def _status(result: Message) -> str:
    return "ERROR" if result.failed or result.content.lstrip().startswith("Error") else "SUCCESS"


def _render_result(call: ToolCall | None, result: Message | None) -> str:
    if call is None:
        return (f'<result tool="{result.tool_name or "unknown"}" status="{_status(result)}">\n'
                f"(a result for a call that was not made in the previous reply)\n{result.content}\n</result>")
    head = f'<result tool="{call.name}" arguments={json.dumps(call.arguments)}'
    if result is None:
        return f'{head} status="ERROR">\nno result was returned for this call\n</result>'
    return f'{head} status="{_status(result)}">\n{result.content}\n</result>'


def _match_results(calls: list[ToolCall], results: list[Message]) -> list[tuple[ToolCall | None, Message | None]]:
    """Pair results with calls by tool_call_id (never by position); a result
    that carries only a tool name (Ollama) takes the first open call of that name."""
    open_calls = list(calls)
    pairs: list[tuple[ToolCall | None, Message | None]] = []
    for result in results:
        call = next((c for c in open_calls if result.tool_call_id and c.id == result.tool_call_id), None)
        if call is None and not result.tool_call_id:
            call = next((c for c in open_calls if c.name == result.tool_name), None)
        if call is not None:
            open_calls.remove(call)
        pairs.append((call, result))
    return [(c, r) for c, r in pairs if c is not None] + [(c, None) for c in open_calls] + \
        [(c, r) for c, r in pairs if c is None]


def render_conversation(messages: list[Message]) -> list[Message]:
    """Assistant calls become `<invoke>` text; each run of tool messages
    becomes one user message reporting every call's outcome."""
    rendered: list[Message] = []
    i = 0
    while i < len(messages):
        message = messages[i]
        if message.role == "tool":  # results with no assistant call before them
            results, i = _run_of_tool_messages(messages, i)
            rendered.append(_results_message([], results))
        elif message.tool_calls:
            calls_text = "\n".join(render_call(c) for c in message.tool_calls)
            rendered.append(Message(role="assistant", content="\n".join(filter(None, [message.content, calls_text]))))
            results, i = _run_of_tool_messages(messages, i + 1)
            rendered.append(_results_message(message.tool_calls, results))
        else:
            rendered.append(message)
            i += 1
    return rendered


def _run_of_tool_messages(messages: list[Message], start: int) -> tuple[list[Message], int]:
    end = start
    while end < len(messages) and messages[end].role == "tool":
        end += 1
    return messages[start:end], end


def _results_message(calls: list[ToolCall], results: list[Message]) -> Message:
    body = "\n".join(_render_result(c, r) for c, r in _match_results(calls, results))
    return Message(role="user", content=f"<tool_results>\n{body}\n</tool_results>")


def tool_rounds(messages: list[Message]) -> int:
    """Assistant replies with tool calls since the user last spoke: the
    rounds of the current agent run (a new request starts a new budget)."""
    last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
    return sum(1 for m in messages[last_user + 1:] if m.role == "assistant" and m.tool_calls)
