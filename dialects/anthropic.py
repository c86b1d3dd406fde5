"""Anthropic Messages dialect mappings, both directions side by side:

- client side: a /v1/messages (or count_tokens) request -> Job
- upstream side: a Job -> the request an Anthropic-compatible upstream gets

A conversation's blocks become the job's messages in order: a turn's text
and image blocks one message (dialects/parts.py), `tool_use` blocks the
calls of that message, each `tool_result` a tool message before it
(`is_error`: a failed result). `system` becomes the first message; system
messages inside `messages` stay where they are.
"""
from __future__ import annotations

import itertools
import json
from typing import Mapping

from dialects.anthropic_schemas import (
    CountTokensRequest, ImageBlock, Message as WireMessage, MessagesRequest, RedactedThinkingBlock, TextBlock,
    ThinkingBlock, ToolResultBlock, ToolUseBlock,
)
from dialects.common import LEVEL_BUDGETS, add_turn, budget_level
from dialects.images import check_vision, from_typed_base64
from dialects.parts import interleaved, joined
from dialects.hints import Hints, read
from protocol.contract import (
    COUNT_VERSION, IMAGES_VERSION, Image, Job, Message, SamplingOptions, ToolCall, ToolChoice, ToolSpec, json_object,
)
from protocol.errors import InvalidRequest

# Claude Code's first system block: attribution for Anthropic's billing,
# with a value (cch=) that changes on every request. Kept, it would make
# every prompt new to the prompt cache; no other model has a use for it.
BILLING_PREFIX = "x-anthropic-billing-header:"
_EFFORTS = {"low": "low", "medium": "medium", "high": "high", "max": "high"}  # onto Ollama's think levels


# --- blocks -> messages ---------------------------------------------------------------
def _image(block: ImageBlock, field: str, vision: bool) -> Image:
    check_vision(vision, field)
    if block.source.type != "base64" or not block.source.data:
        raise InvalidRequest(f"{field}: only base64 image sources are accepted (this server fetches no URL and "
                             f"keeps no files); send the image as source.type \"base64\"", param=field)
    return from_typed_base64(block.source.data, block.source.media_type, field)


def _tool_result(block: ToolResultBlock, field: str, vision: bool) -> Message:
    parts = [block.content] if isinstance(block.content, str) else block.content
    texts = [part if isinstance(part, str) else part.text for part in parts if not isinstance(part, ImageBlock)]
    images = [_image(part, f"{field}.content.{n}", vision) for n, part in enumerate(parts)
              if isinstance(part, ImageBlock)]
    return Message(role="tool", content="\n".join(texts), images=images, tool_call_id=block.tool_use_id,
                   failed=block.is_error)


def to_messages(message: WireMessage, index: int, vision: bool, thinks: bool) -> list[Message]:
    """The turn's tool results, then its one message (dialects/parts.py):
    its texts and images in order, the calls and the thinking with it."""
    blocks = [TextBlock(type="text", text=message.content)] if isinstance(message.content, str) else message.content
    field = f"messages.{index}.content"
    if message.role == "system":
        return [Message(role="system", content="\n\n".join(b.text for b in blocks if isinstance(b, TextBlock)))]
    results: list[Message] = []
    parts, calls, thoughts, signatures, redacted = [], [], [], [], []
    for n, block in enumerate(blocks):
        if isinstance(block, TextBlock):
            parts.append(block.text)
        elif isinstance(block, ImageBlock):
            parts.append(_image(block, f"{field}.{n}", vision))
        elif isinstance(block, ToolUseBlock):
            calls.append(ToolCall(id=block.id, name=block.name, arguments=json.dumps(block.input, ensure_ascii=False)))
        elif isinstance(block, ToolResultBlock):
            results.append(_tool_result(block, f"{field}.{n}", vision))
        elif isinstance(block, ThinkingBlock) and thinks:  # passed back to a model that thinks, else dropped
            thoughts.append(block.thinking)
            signatures.append(block.signature)
        elif isinstance(block, RedactedThinkingBlock) and thinks:
            redacted.append(block.data)
    if not (parts or calls or thoughts or redacted):
        return results  # a turn of tool results only
    text, images = joined(parts)
    return results + [Message(role=message.role, content=text, images=images, tool_calls=calls,
                              thinking="".join(thoughts), thinking_signature=signatures[-1] if signatures else "",
                              redacted_thinking=redacted)]


def system_text(system: str | list[TextBlock] | None) -> str:
    """The system prompt, without the billing line."""
    blocks = [system] if isinstance(system, str) else [block.text for block in system or []]
    return "\n\n".join(text for text in blocks if not text.startswith(BILLING_PREFIX))


def conversation(request: CountTokensRequest, capabilities) -> list[Message]:
    vision, thinks = "vision" in capabilities, "thinking" in capabilities
    system = system_text(request.system)
    head = [Message(role="system", content=system)] if system else []
    return head + [part for i, m in enumerate(request.messages) for part in to_messages(m, i, vision, thinks)]


# --- tools, thinking, sampling --------------------------------------------------------
def to_tool_specs(request: CountTokensRequest) -> list[ToolSpec]:
    return [ToolSpec(name=t.name, description=t.description or "", parameters=t.input_schema or {})
            for t in request.tools or [] if t.is_client_tool]


def server_only_tools(request: CountTokensRequest) -> list[str]:
    """Anthropic's own server tools (web search, code execution, ...): left
    out of the job, named in the request log."""
    return [f"{t.name} ({t.type})" for t in request.tools or [] if not t.is_client_tool]


def to_tool_choice(request: CountTokensRequest) -> tuple[ToolChoice, bool]:
    """The choice, and whether several calls may come at once."""
    choice = request.tool_choice
    if choice is None:
        return ToolChoice(), True
    parallel = not choice.disable_parallel_tool_use
    if choice.type == "tool":
        if choice.name not in {t.name for t in to_tool_specs(request)}:
            raise InvalidRequest(f"tool_choice.name: {choice.name!r} is not among the tools", param="tool_choice.name")
        return ToolChoice(mode="function", name=choice.name), parallel
    return ToolChoice(mode={"any": "required"}.get(choice.type, choice.type)), parallel


def to_think(request: MessagesRequest, capabilities) -> bool | str | None:
    """`thinking` and `output_config.effort`, for a model that thinks (a
    model that does not ignores them: Claude Code always asks)."""
    if "thinking" not in capabilities:
        return None
    kind = request.thinking.type if request.thinking else None
    effort = _EFFORTS.get(request.output_config.effort) if request.output_config else None
    if kind == "disabled":
        return False
    if kind == "enabled":
        return effort or budget_level(request.thinking.budget_tokens)
    return effort


def to_sampling(request: MessagesRequest, context_length: int) -> SamplingOptions:
    """max_tokens above the model's context is clamped to it (Claude Code
    asks for 32,000 whatever the model); the worker clamps it again to what
    the prompt leaves."""
    return SamplingOptions(max_tokens=min(request.max_tokens, context_length), temperature=request.temperature,
                           top_p=request.top_p, top_k=request.top_k, stop=list(request.stop_sequences or []))


def hints(request: MessagesRequest | CountTokensRequest, headers: Mapping[str, str]) -> Hints:
    """Its routing hints (dialects/hints.py): Claude Code names its session in
    a header or in `metadata.user_id`; its small/fast alias is background work."""
    metadata = getattr(request, "metadata", None)
    return read(headers, request.model, user_id=metadata.user_id if metadata is not None else None)


def count_to_job(request: CountTokensRequest, job_id: str, model: str, capabilities, beta: str = "") -> Job:
    """A count_tokens request: the conversation a Messages request would
    make, counted by the worker without a reply."""
    messages = conversation(request, capabilities)
    choice, _ = to_tool_choice(request)
    return Job(id=job_id, model=model, messages=messages, tools=to_tool_specs(request), tool_choice=choice,
               count_only=True, anthropic_beta=beta, version=COUNT_VERSION)


def messages_to_job(request: MessagesRequest, job_id: str, model: str, capabilities, context_length: int,
                    beta: str = "") -> Job:
    """`beta`: the client's anthropic-beta header, for an Anthropic upstream."""
    messages = conversation(request, capabilities)
    choice, parallel = to_tool_choice(request)
    return Job(id=job_id, model=model, messages=messages, options=to_sampling(request, context_length),
               tools=to_tool_specs(request), tool_choice=choice, parallel_tool_calls=parallel,
               think=to_think(request, capabilities), report_prompt=request.stream,  # message_start carries it
               anthropic_beta=beta, version=IMAGES_VERSION if any(m.images for m in messages) else 1)


# --- upstream side: Job -> request ---------------------------------------------------
# Thinking levels onto budgets (Anthropic's least is 1,024; it must stay
# under max_tokens).
THINKING_BUDGETS = {True: 8192} | LEVEL_BUDGETS
MIN_THINKING_BUDGET = 1024


def _content(message: Message) -> list[dict]:
    blocks: list[dict] = []
    if message.thinking and message.thinking_signature:  # unsigned thinking is refused: it is left out
        blocks.append({"type": "thinking", "thinking": message.thinking, "signature": message.thinking_signature})
    blocks += [{"type": "redacted_thinking", "data": data} for data in message.redacted_thinking]
    blocks += [{"type": "image", "source": {"type": "base64", "media_type": piece.mime, "data": piece.data}}
               if isinstance(piece, Image) else {"type": "text", "text": piece}
               for piece in interleaved(message) if piece]  # text and images where they stood
    blocks += [{"type": "tool_use", "id": call.id, "name": call.name, "input": json_object(call.arguments)}
               for call in message.tool_calls]
    return blocks


def _wire_tool_result(message: Message, ids_by_name: dict[str, str]) -> dict:
    """Ollama's clients name the tool instead of the call: the latest call of that name."""
    call_id = message.tool_call_id or ids_by_name.get(message.tool_name or "", "")
    content = [{"type": "text", "text": message.content}] if message.content else []
    content += _content(message.model_copy(update={"content": "", "tool_calls": [], "thinking": "",
                                                   "redacted_thinking": []}))
    return {"type": "tool_result", "tool_use_id": call_id, "content": content, "is_error": message.failed}


def _wire_turns(messages: list[Message]) -> tuple[str, list[dict]]:
    """The leading system messages as `system`; the rest as turns (tool
    results in user turns, adjacent turns of one role joined, as the API
    wants them). Later system messages stay in place, as Claude Code 2.1
    sends them to Anthropic's API (and to every server it is pointed at)."""
    lead = len(list(itertools.takewhile(lambda m: m.role == "system", messages)))
    system = "\n\n".join(m.content for m in messages[:lead])
    ids_by_name = {call.name: call.id for m in messages for call in m.tool_calls}
    turns: list[dict] = []
    for message in messages[lead:]:
        role = "user" if message.role == "tool" else message.role
        blocks = [_wire_tool_result(message, ids_by_name)] if message.role == "tool" else _content(message)
        add_turn(turns, role, "content", blocks)
    return system, turns


def _wire_tool_choice(job: Job) -> dict:
    choice = {"auto": {"type": "auto"}, "required": {"type": "any"}, "none": {"type": "none"}}.get(
        job.tool_choice.mode, {"type": "tool", "name": job.tool_choice.name})
    return choice | ({"disable_parallel_tool_use": True} if not job.parallel_tool_calls else {})


def _wire_thinking(think, max_tokens: int) -> dict | None:
    budget = min(THINKING_BUDGETS.get(think, 0), max_tokens - 1) if think else 0
    return {"type": "enabled", "budget_tokens": budget} if budget >= MIN_THINKING_BUDGET else None


def _wire_sampling(options: SamplingOptions, thinking: dict | None) -> dict:
    """With thinking on, Anthropic takes no temperature, top_p or top_k."""
    if thinking is not None:
        return {}
    return {"temperature": min(options.temperature, 1.0) if options.temperature is not None else None,
            "top_p": options.top_p, "top_k": options.top_k}


def upstream_request(job: Job, upstream_model: str) -> tuple[str, dict]:
    """A chat job as a streamed Messages request. A raw prompt (a code
    completion, Ollama's raw mode) has no Messages form: refused."""
    if job.prompt is not None:
        raise InvalidRequest(f'"{job.model}" is an Anthropic Messages model: it takes chat requests, not raw '
                             "prompts (fill-in-the-middle, raw mode)")
    system, turns = _wire_turns(job.messages)
    max_tokens = job.options.max_tokens or 4096
    thinking = _wire_thinking(job.think, max_tokens)
    body = {"model": upstream_model, "messages": turns, "max_tokens": max_tokens, "stream": True,
            "system": system or None, "stop_sequences": job.options.stop or None, "thinking": thinking,
            **_wire_sampling(job.options, thinking)}
    if job.tools:
        body["tools"] = [{"name": t.name, "description": t.description, "input_schema": t.parameters or {
            "type": "object"}} for t in job.tools]
        body["tool_choice"] = _wire_tool_choice(job)
    if isinstance(job.format, dict):  # structured output: the schema (Anthropic has no bare JSON mode)
        body["output_config"] = {"format": {"type": "json_schema", "schema": job.format}}
    return "/v1/messages", {k: v for k, v in body.items() if v is not None}


def count_request(job: Job, upstream_model: str) -> tuple[str, dict]:
    """The same conversation, for the upstream's own count_tokens."""
    _, body = upstream_request(job, upstream_model)
    return "/v1/messages/count_tokens", {k: v for k, v in body.items() if k not in (
        "max_tokens", "stream", "stop_sequences", "temperature", "top_p", "top_k", "output_config")}
