"""OpenAI Responses dialect mappings (client side: a /v1/responses request
-> Job).

Items become the job's messages in order: `instructions` first as the
system message, each message item one message however many parts it has
(dialects/parts.py), `function_call` items as the assistant's calls
(adjacent ones joined: a parallel round), their outputs as tool messages
matched by `call_id`, `reasoning` summaries passed back to a model that
thinks. Custom (freeform) tools, such as Codex's `apply_patch`, are offered
as tools taking one text `input`; namespaces are unfolded into their tools.
"""
from __future__ import annotations

import json
from typing import Mapping

from pydantic import TypeAdapter

from dialects.images import check_vision, from_url
from dialects.parts import joined
from dialects.tools import custom_arguments, custom_tool_spec
from dialects.responses_schemas import (
    CompactionItem, CompactionTriggerItem, CustomToolCallItem, CustomToolCallOutputItem, FunctionCallItem,
    FunctionCallOutputItem, InputImage, InputItem, InputText, LocalShellCallItem, LocalShellCallOutputItem, MessageItem,
    NamedToolChoice, ReasoningItem, Refusal, ResponsesRequest, SummaryText, Tool,
)
from dialects.hints import Hints, read
from protocol.contract import IMAGES_VERSION, Image, Job, Message, SamplingOptions, ToolCall, ToolChoice, ToolSpec
from protocol.errors import InvalidRequest

LOCAL_SHELL = "local_shell"  # the name a local shell call goes by in the conversation
_EFFORTS = {"none": False, "minimal": "low", "low": "low", "medium": "medium", "high": "high", "xhigh": "high"}


# --- tools ------------------------------------------------------------------------------
def unfolded(tools: list[Tool]) -> list[Tool]:
    """Namespaces' tools in their place."""
    return [inner for tool in tools for inner in (unfolded(tool.tools or []) if tool.type == "namespace" else [tool])]


def namespaces(tools: list[Tool]) -> dict[str, str]:
    """A namespace's tools' names -> the namespace's (its calls name it)."""
    return {inner.name: tool.name for tool in tools if tool.type == "namespace" and tool.name
            for inner in unfolded(tool.tools or []) if inner.name}


def to_tool_specs(request: ResponsesRequest) -> list[ToolSpec]:
    specs = []
    for tool in unfolded(request.tools):
        if tool.type == "function" and tool.name:
            specs.append(ToolSpec(name=tool.name, description=tool.description or "", parameters=tool.parameters or {}))
        elif tool.type == "custom" and tool.name:
            specs.append(custom_tool_spec(tool.name, tool.description or "", _format(tool.format)))
    return specs


def _format(form: dict | None) -> dict | None:
    """Responses' format is already flat ({type, syntax, definition})."""
    if not form:
        return None
    if form.get("type") != "grammar":
        return {"type": "text"}
    syntax, definition = form.get("syntax") or "lark", form.get("definition", "")
    return {"type": "grammar", "syntax": str(syntax), "definition": str(definition)}


def server_only_tools(request: ResponsesRequest) -> list[str]:
    """Tools only OpenAI runs (web search, file search, image generation):
    left out of the job, named in the request log."""
    return [tool.name or tool.type for tool in unfolded(request.tools) if tool.type not in ("function", "custom")]


def to_tool_choice(request: ResponsesRequest) -> ToolChoice:
    choice = request.tool_choice
    if not isinstance(choice, NamedToolChoice):
        return ToolChoice(mode=choice)
    if choice.name not in {spec.name for spec in to_tool_specs(request)}:
        raise InvalidRequest(f"tool_choice.name: {choice.name!r} is not among the tools", param="tool_choice")
    return ToolChoice(mode="function", name=choice.name)


# --- items -> messages ----------------------------------------------------------------
def _text(part) -> str:
    return part.refusal if isinstance(part, Refusal) else part.text


def _output_text(output) -> str:
    return output if isinstance(output, str) else "\n".join(_text(p) for p in output if not isinstance(p, InputImage))


def _message(item: MessageItem, field: str, vision: bool, thinking: str) -> list[Message]:
    """One message, whatever parts it came in (dialects/parts.py), with the
    thinking passed back before it."""
    parts = [InputText(type="input_text", text=item.content)] if isinstance(item.content, str) else item.content
    text, images = joined([_image(part, f"{field}.content.{n}", vision) if isinstance(part, InputImage)
                           else _text(part) for n, part in enumerate(parts)])
    role = "system" if item.role == "developer" else item.role
    return [Message(role=role, content=text, images=images, thinking=thinking if role == "assistant" else "")]


def _image(part: InputImage, field: str, vision: bool) -> Image:
    check_vision(vision, field)
    if not part.image_url:
        raise InvalidRequest(f"{field}: only images sent inline as a data URL are accepted", param=field)
    return from_url(part.image_url, field)


def _call(item: FunctionCallItem | CustomToolCallItem | LocalShellCallItem) -> ToolCall:
    """The call as the model sees calls: a name and JSON arguments (a custom
    tool's text as its `input`, a local shell call's action as they are)."""
    if isinstance(item, FunctionCallItem):
        return ToolCall(id=item.call_id, name=item.name, arguments=item.arguments)
    if isinstance(item, CustomToolCallItem):
        return ToolCall(id=item.call_id, name=item.name, arguments=custom_arguments(item.input))
    return ToolCall(id=item.call_id, name=LOCAL_SHELL, arguments=json.dumps(item.action, ensure_ascii=False))


def to_messages(request: ResponsesRequest, vision: bool, thinks: bool) -> list[Message]:
    messages = [Message(role="system", content=request.instructions)] if request.instructions else []
    items = as_items(request)
    thinking, signature = "", ""  # a reasoning item's summary (and signature), for the assistant turn after it
    for n, item in enumerate(items):
        if isinstance(item, MessageItem):
            messages += _signed(_message(item, f"input.{n}", vision, thinking), signature)
            thinking, signature = ("", "") if item.role == "assistant" else (thinking, signature)
        elif isinstance(item, (FunctionCallItem, CustomToolCallItem, LocalShellCallItem)):
            if messages and messages[-1].role == "assistant" and not messages[-1].tool_call_id:
                messages[-1] = messages[-1].model_copy(update={"tool_calls": messages[-1].tool_calls + [_call(item)]})
            else:
                messages.append(Message(role="assistant", tool_calls=[_call(item)], thinking=thinking,
                                        thinking_signature=signature if thinking else ""))
            thinking, signature = "", ""
        elif isinstance(item, (FunctionCallOutputItem, CustomToolCallOutputItem, LocalShellCallOutputItem)):
            messages.append(Message(role="tool", content=_output_text(item.output), tool_call_id=item.call_id))
        elif isinstance(item, ReasoningItem) and thinks:
            thinking += "".join(part.text for part in item.summary)
            signature = item._signature or signature
    return messages


def _signed(messages: list[Message], signature: str) -> list[Message]:
    """An assistant message's passed-back thinking with its signature (an
    Anthropic upstream checks it)."""
    return [m.model_copy(update={"thinking_signature": signature}) if m.thinking and signature else m
            for m in messages]


# --- the job --------------------------------------------------------------------------
def to_format(request: ResponsesRequest):
    text_format = request.text.format if request.text else None
    if text_format is None or text_format.type == "text":
        return None
    if text_format.type == "json_object":
        return "json"
    if not text_format.schema_:
        raise InvalidRequest("text.format.schema: required for type json_schema", param="text.format.schema")
    return text_format.schema_


def to_think(request: ResponsesRequest, capabilities) -> bool | str | None:
    """reasoning.effort, for a model that thinks (others ignore it, as
    OpenAI-compatible servers do: Codex always sends a reasoning field)."""
    if "thinking" not in capabilities or request.reasoning is None or request.reasoning.effort is None:
        return None
    return _EFFORTS[request.reasoning.effort]


def hints(request: ResponsesRequest, headers: Mapping[str, str]) -> Hints:
    """Its routing hints (dialects/hints.py): Codex names its session and what
    a call is for in headers; `background: true` is background work."""
    return read(headers, request.model, flagged=request.background)


def responses_to_job(request: ResponsesRequest, job_id: str, model: str, capabilities) -> Job:
    messages = to_messages(request, "vision" in capabilities, "thinking" in capabilities)
    if not messages:
        raise InvalidRequest("input: nothing to answer (no instructions and no input items)", param="input")
    options = SamplingOptions(max_tokens=request.max_output_tokens, temperature=request.temperature,
                              top_p=request.top_p)
    return Job(id=job_id, model=model, messages=messages, options=options, tools=to_tool_specs(request),
               tool_choice=to_tool_choice(request), parallel_tool_calls=request.parallel_tool_calls,
               format=to_format(request), think=to_think(request, capabilities),
               cache_key=request.prompt_cache_key or "",
               version=IMAGES_VERSION if any(m.images for m in messages) else 1)


def request_fields(request: ResponsesRequest) -> dict:
    """The request's settings as a response object repeats them."""
    choice = request.tool_choice.model_dump() if isinstance(request.tool_choice, NamedToolChoice) \
        else request.tool_choice
    text_format = request.text.format.model_dump(by_alias=True, exclude_none=True) if request.text and \
        request.text.format else {"type": "text"}
    return {"instructions": request.instructions, "max_output_tokens": request.max_output_tokens,
            "parallel_tool_calls": request.parallel_tool_calls, "previous_response_id": request.previous_response_id,
            "reasoning": {"effort": request.reasoning.effort if request.reasoning else None,
                          "summary": request.reasoning.summary if request.reasoning else None},
            "store": request.store, "temperature": request.temperature, "text": {"format": text_format},
            "tool_choice": choice, "tools": [t.model_dump(exclude_none=True) for t in request.tools],
            "top_p": request.top_p, "truncation": "disabled", "user": request.user,
            "metadata": request.metadata or {}, "prompt_cache_key": request.prompt_cache_key,
            "background": request.background}


# --- stored responses ----------------------------------------------------------------
_ITEMS = TypeAdapter(list[InputItem])


def input_items(request: ResponsesRequest) -> list[dict]:
    """The request's own input, as items (what a stored response keeps)."""
    if isinstance(request.input, str):
        return [{"type": "message", "role": "user", "content": request.input}]
    return [item.model_dump(by_alias=True, exclude_none=True) for item in request.input]


def continued(request: ResponsesRequest, earlier: list[dict]) -> ResponsesRequest:
    """The request with the stored conversation before its own input (a
    response's output items are input items as they are)."""
    return request.model_copy(update={"input": _ITEMS.validate_python(earlier + input_items(request))})


# --- compaction (Codex's remote compaction: a trigger item, or POST /v1/responses/compact) ----------------
# What the model is asked for, after the conversation (the README quotes it).
COMPACTION_PROMPT = (
    "Stop here and summarise the conversation above for whoever carries on with it, instead of continuing it. "
    "Include: the user's goal and every request they made; what has been done (files read or changed, "
    "commands run and what they showed); decisions taken and why; what is still to do; and anything the next "
    "step needs exactly as it is (names, paths, values, error messages). Write it as a brief for a colleague "
    "taking over, in plain text, without greeting or commentary.")
# How a compaction item comes back to the model: the summary, said to be one.
SUMMARY_PREFIX = ("An earlier part of this conversation was compacted; its summary follows. Carry on from where it "
                  "leaves off.\n\n")
KEPT_USER_CHARACTERS = 80_000  # the newest user messages a compaction keeps word for word (~20K tokens)


def is_compaction(request: ResponsesRequest) -> bool:
    """Codex's remote compaction v2: the input ends with its trigger item."""
    return isinstance(request.input, list) and any(isinstance(item, CompactionTriggerItem) for item in request.input)


def as_items(request: ResponsesRequest) -> list:
    return [MessageItem(role="user", content=request.input)] if isinstance(request.input, str) else request.input


def compaction_request(request: ResponsesRequest) -> ResponsesRequest:
    """The request that asks the model for the summary: the conversation,
    then our prompt; no tools (a call would be lost), no reasoning asked."""
    kept = [item for item in as_items(request) if not isinstance(item, CompactionTriggerItem)]
    return request.model_copy(update={"input": kept + [MessageItem(role="user", content=COMPACTION_PROMPT)],
                                      "tools": [], "tool_choice": "none", "reasoning": None, "text": None})


def opened(request: ResponsesRequest, open_sealed) -> ResponsesRequest:
    """The request with the items this server sealed opened (`open_sealed(kind,
    blob, field)` gives the text): a compaction becomes its summary, said as a
    user message; a reasoning item's sealed text its summary."""
    if isinstance(request.input, str):
        return request
    items = []
    for n, item in enumerate(request.input):
        if isinstance(item, CompactionItem):
            summary = open_sealed("compaction", item.encrypted_content, f"input.{n}.encrypted_content")
            item = MessageItem(role="user", content=SUMMARY_PREFIX + summary)
        elif isinstance(item, ReasoningItem) and item.encrypted_content is not None:
            sealed = json.loads(open_sealed("reasoning", item.encrypted_content, f"input.{n}.encrypted_content"))
            item = item.model_copy(update={"summary": [SummaryText(text=sealed["text"])], "encrypted_content": None})
            item._signature = sealed.get("signature", "")
        items.append(item)
    return request.model_copy(update={"input": items})


def _as_output(message: MessageItem) -> dict:
    """A user message as an output item lists it: its content as parts."""
    item = message.model_dump(exclude_none=True)
    if isinstance(message.content, str):
        item["content"] = [{"type": "input_text", "text": message.content}]
    return item


def kept_user_messages(request: ResponsesRequest) -> list[dict]:
    """What a compaction keeps word for word (POST /v1/responses/compact
    answers them before its compaction item, as Codex keeps them): the
    newest user messages, up to KEPT_USER_CHARACTERS, oldest first."""
    messages = [item for item in as_items(request) if isinstance(item, MessageItem) and item.role == "user"]
    kept, room = [], KEPT_USER_CHARACTERS
    for message in reversed(messages):
        size = len(message.content) if isinstance(message.content, str) else sum(
            len(_text(part)) for part in message.content if not isinstance(part, InputImage))
        if size > room:
            break
        kept.append(_as_output(message))
        room -= size
    return list(reversed(kept))
