"""Anthropic Messages dialect mappings (client side: a /v1/messages request
-> Job).

A conversation's blocks become the job's messages in order: each text block
a message of its own (as the OpenAI parts are; echo answers the last),
`tool_use` blocks the calls of the assistant message they end, each
`tool_result` a tool message (`is_error`: a failed result), images with the
last text of their turn. `system` becomes the first message; system
messages inside `messages` stay where they are.
"""
from __future__ import annotations

import json

from dialects.anthropic_schemas import (
    CountTokensRequest, ImageBlock, Message as WireMessage, MessagesRequest, TextBlock, ThinkingBlock, ToolResultBlock,
    ToolUseBlock,
)
from dialects.images import from_typed_base64
from protocol.contract import COUNT_VERSION, IMAGES_VERSION, Image, Job, Message, SamplingOptions, ToolCall, ToolChoice, ToolSpec
from protocol.errors import InvalidRequest

# Claude Code's first system block: attribution for Anthropic's billing,
# with a value (cch=) that changes on every request. Kept, it would make
# every prompt new to the prompt cache; no other model has a use for it.
BILLING_PREFIX = "x-anthropic-billing-header:"
_EFFORTS = {"low": "low", "medium": "medium", "high": "high", "max": "high"}  # onto Ollama's think levels


# --- blocks -> messages ---------------------------------------------------------------
def _image(block: ImageBlock, field: str, vision: bool) -> Image:
    if not vision:
        raise InvalidRequest(f"{field}: this model does not support images", param=field)
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


def _grouped(role: str, texts: list[str], calls: list[ToolCall], images: list[Image], thinking: str) -> list[Message]:
    """One message per text; the calls, images and thinking go with the last."""
    if not (texts or calls or images or thinking):
        return []  # a turn of tool results only
    texts = texts or [""]
    last = len(texts) - 1
    return [Message(role=role, content=text, tool_calls=calls if n == last else [],
                    images=images if n == last else [], thinking=thinking if n == last else "")
            for n, text in enumerate(texts)]


def to_messages(message: WireMessage, index: int, vision: bool, thinks: bool) -> list[Message]:
    blocks = [TextBlock(type="text", text=message.content)] if isinstance(message.content, str) else message.content
    field = f"messages.{index}.content"
    if message.role == "system":
        return [Message(role="system", content="\n\n".join(b.text for b in blocks if isinstance(b, TextBlock)))]
    results: list[Message] = []
    texts, calls, images, thoughts = [], [], [], []
    for n, block in enumerate(blocks):
        if isinstance(block, TextBlock):
            texts.append(block.text)
        elif isinstance(block, ImageBlock):
            images.append(_image(block, f"{field}.{n}", vision))
        elif isinstance(block, ToolUseBlock):
            calls.append(ToolCall(id=block.id, name=block.name, arguments=json.dumps(block.input, ensure_ascii=False)))
        elif isinstance(block, ToolResultBlock):
            results.append(_tool_result(block, f"{field}.{n}", vision))
        elif isinstance(block, ThinkingBlock) and thinks:  # passed back to a model that thinks, else dropped
            thoughts.append(block.thinking)
    return results + _grouped(message.role, texts, calls, images, "".join(thoughts))


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
    effort = _EFFORTS.get(request.output_config.effort) if request.output_config and request.output_config.effort \
        else None
    if kind == "disabled":
        return False
    if kind == "enabled":
        return effort or True
    return effort


def to_sampling(request: MessagesRequest, context_length: int) -> SamplingOptions:
    """max_tokens above the model's context is clamped to it (Claude Code
    asks for 32,000 whatever the model); the worker clamps it again to what
    the prompt leaves."""
    return SamplingOptions(max_tokens=min(request.max_tokens, context_length), temperature=request.temperature,
                           top_p=request.top_p, top_k=request.top_k, stop=list(request.stop_sequences or []))


def count_to_job(request: CountTokensRequest, job_id: str, model: str, capabilities) -> Job:
    """A count_tokens request: the conversation a Messages request would
    make, counted by the worker without a reply."""
    messages = conversation(request, capabilities)
    choice, _ = to_tool_choice(request)
    return Job(id=job_id, model=model, messages=messages, tools=to_tool_specs(request), tool_choice=choice,
               count_only=True, version=COUNT_VERSION)


def messages_to_job(request: MessagesRequest, job_id: str, model: str, capabilities, context_length: int) -> Job:
    messages = conversation(request, capabilities)
    choice, parallel = to_tool_choice(request)
    return Job(id=job_id, model=model, messages=messages, options=to_sampling(request, context_length),
               tools=to_tool_specs(request), tool_choice=choice, parallel_tool_calls=parallel,
               think=to_think(request, capabilities), report_prompt=request.stream,  # message_start carries it
               version=IMAGES_VERSION if any(m.images for m in messages) else 1)
