"""Emulated tool calling for one job: what the model is shown (the plan) and
what the client is sent (the reply filter).

Plan: offer the tools `tool_choice` allows, unless the step limit is reached
(then no tools and a request for a final answer); rewrite calls and results
as text; put the instructions in the system prompt, or inject them into the
first user message for backends that ignore the system role.
Reply: text streams until the first call; then only calls (OpenAI clients
expect text before calls, never after), each with a fresh id. Calls of
server tools (run by the worker over MCP, see workers/server_tools.py) are kept
aside, never sent to the client as its own calls.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from protocol.contract import Job, Message, ToolCall, ToolSpec, new_call_id
from protocol.events import TextEvent, ToolCallEvent
from workers.model_output import NativeCall
from workers.toolcalls.arguments import typed_arguments
from workers.toolcalls.parser import ParsedCall, ToolCallParser
from workers.toolcalls.prompt import STEP_LIMIT_NOTE, render_conversation, tool_instructions, tool_rounds
from workers.toolcalls.system_inject import inject_system

@dataclass
class ToolPlan:
    messages: list[Message]  # the conversation as the model sees it
    tools: list[ToolSpec]  # the tools offered
    step_limited: bool = False
    native: bool = False  # tools go to the backend as they are; its calls come back whole
    parallel: bool = True  # False: at most one call reaches the client
    forced: bool = False  # tool_choice required (or a named function): the reply must call a tool


def _offered(job: Job, tools_mode: str, server_tools: list[ToolSpec]) -> list[ToolSpec]:
    """The client's tools, then the server's; a server tool named like one
    of the client's is not offered (the client declared its own and expects
    calls to it)."""
    if tools_mode == "off" or job.tool_choice.mode == "none":
        return []
    client_names = {t.name for t in job.tools}
    tools = list(job.tools) + [t for t in server_tools if t.name not in client_names]
    if job.tool_choice.mode == "function":
        return [t for t in tools if t.name == job.tool_choice.name]
    return tools


def _with_system_note(messages: list[Message], note: str) -> list[Message]:
    """Append the note to the leading system message, or add one."""
    if not note:
        return messages
    if messages and messages[0].role == "system":
        leading = max(i for i, m in enumerate(messages) if all(x.role == "system" for x in messages[: i + 1]))
        updated = messages[leading].model_copy(update={"content": f"{messages[leading].content}\n\n{note}"})
        return messages[:leading] + [updated] + messages[leading + 1:]
    return [Message(role="system", content=note)] + messages


def plan_tools(job: Job, tools_mode: str, system_mode: str, step_limit: int,
               server_tools: list[ToolSpec] = ()) -> ToolPlan:
    offered = _offered(job, tools_mode, list(server_tools))
    limited = bool(offered) and tool_rounds(job.messages) >= step_limit
    if limited:
        offered = []
    native = tools_mode == "native"
    if native:  # the model reads tools and results natively: only the limit needs saying
        note, messages = (STEP_LIMIT_NOTE if limited else ""), job.messages
    else:
        note = (tool_instructions(offered, job.tool_choice, job.parallel_tool_calls) if offered
                else (STEP_LIMIT_NOTE if limited else ""))
        messages = render_conversation(job.messages)
    if system_mode == "inject":
        messages = inject_system(messages, note)
    else:
        messages = _with_system_note(messages, note)
    forced = bool(offered) and job.tool_choice.mode in ("required", "function")
    return ToolPlan(messages, offered, limited, native, job.parallel_tool_calls, forced)


class ReplyFilter:
    """Model output -> TextEvents, then ToolCallEvents. Text is parsed for
    emulated calls unless the plan is native (calls then arrive whole).
    Calls of `server_tools` are collected in `server_calls` instead."""

    def __init__(self, plan: ToolPlan, server_tools: frozenset[str] = frozenset()):
        self._schemas = {t.name: t.parameters for t in plan.tools}
        self._parser = ToolCallParser(set(self._schemas)) if plan.tools and not plan.native else None
        self._most_calls = None if plan.parallel else 1
        self._server_tools = server_tools
        self.calls = 0  # the client's calls (their index)
        self.server_calls: list[ToolCall] = []

    @property
    def any_calls(self) -> int:
        return self.calls + len(self.server_calls)

    @property
    def malformed(self) -> bool:
        """The reply began an emulated call of a declared tool that could not be read (it went on as text)."""
        return self._parser is not None and self._parser.malformed

    def feed(self, piece: str | NativeCall) -> list[TextEvent | ToolCallEvent]:
        if isinstance(piece, NativeCall):
            return self._events([piece])
        return self._events(self._parser.feed(piece) if self._parser else [piece])

    def finish(self) -> list[TextEvent | ToolCallEvent]:
        return self._events(self._parser.finish()) if self._parser else []

    def _events(self, items: list) -> list[TextEvent | ToolCallEvent]:
        events: list[TextEvent | ToolCallEvent] = []
        for item in items:
            if isinstance(item, (ParsedCall, NativeCall)) and self.any_calls == self._most_calls:
                continue  # parallel_tool_calls false: the first call only
            if isinstance(item, (ParsedCall, NativeCall)):
                events += self._call(item)
            elif item and self.any_calls == 0:
                events.append(TextEvent(text=item))
        return events

    def _call(self, item: ParsedCall | NativeCall) -> list[ToolCallEvent]:
        if isinstance(item, ParsedCall):
            arguments = json.dumps(typed_arguments(item.arguments, self._schemas.get(item.name, {})),
                                   ensure_ascii=False)
            call_id = new_call_id()
        else:
            arguments, call_id = item.arguments, item.id or new_call_id()
        if item.name in self._server_tools:
            self.server_calls.append(ToolCall(id=call_id, name=item.name, arguments=arguments))
            return []
        self.calls += 1
        return [ToolCallEvent(index=self.calls - 1, id=call_id, name=item.name, arguments=arguments)]
