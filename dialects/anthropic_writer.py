"""Anthropic Messages dialect writer: the message object, its stream of
named events, Anthropic's error envelope, and its model list.

A stream, exactly as Anthropic's: `message_start`, then per content block
`content_block_start`, its deltas and `content_block_stop` (one block open
at a time, indexed from 0), then `message_delta` (stop reason, cumulative
usage) and `message_stop`; keep-alives are `ping` events; an error after
the 200 is an `error` event. Every frame is `event: <type>` and `data:`
with that type in the object (the SDKs read the type from the data).
"""
from __future__ import annotations

import base64
import hashlib

from dialects.writer import Frame, NamedEvent, Transcript, Writer, reply_extensions, server_tool_comment
from protocol.contract import json_object
from protocol.events import DoneEvent, FinishReason, PromptEvent, ServerToolEvent, ToolCallEvent
from protocol.errors import PromptTooLong, SwitchboardError

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    503: "overloaded_error",  # a busy upstream, the queue unavailable for a moment: retry
    504: "timeout_error",
    529: "overloaded_error",
}
_STOP_REASONS = {FinishReason.LENGTH: "max_tokens", FinishReason.TOOL_CALLS: "tool_use"}
PING = NamedEvent("ping", {"type": "ping"})


def error_message(error: SwitchboardError) -> str:
    """Claude Code compacts the conversation on exactly this wording."""
    if isinstance(error, PromptTooLong):
        return f"prompt is too long: {error.prompt_tokens} tokens > {error.context_tokens} maximum"
    return error.message


def error_body(error: SwitchboardError, request_id: str | None = None) -> dict:
    kind = _ERROR_TYPES.get(error.status, "api_error" if error.status >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": kind, "message": error_message(error)}, "request_id": request_id}


def stop_reason(done: DoneEvent) -> str:
    if done.stop_sequence is not None:
        return "stop_sequence"
    return _STOP_REASONS.get(done.reason, "end_turn")


def usage(prompt_tokens: int = 0, cached_tokens: int | None = None, output_tokens: int = 0) -> dict:
    """Anthropic's counts: input_tokens are the prompt's tokens not read
    from the cache (its clients add the three up for the prompt's size)."""
    cached = cached_tokens or 0
    return {"input_tokens": prompt_tokens - cached, "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": cached, "output_tokens": output_tokens}


def final_usage(done: DoneEvent) -> dict:
    return usage(done.usage.prompt_tokens, done.usage.cached_tokens, done.usage.completion_tokens)


def tool_use_id(call_id: str) -> str:
    """Anthropic's clients expect `toolu_` ids; ours (call_...) map onto
    them one to one, so a result sent back names the same call."""
    return call_id if call_id.startswith("toolu_") else "toolu_" + call_id.removeprefix("call_")


def signature(thinking: str) -> str:
    """A thinking block's signature where no Anthropic upstream gave one.
    Anthropic's clients require one and send it back with the block; other
    models take thinking back as text, so it is a digest of the text,
    opaque to clients."""
    return base64.b64encode(hashlib.sha256(thinking.encode()).digest()).decode()


def _tool_use_block(call: ToolCallEvent) -> dict:
    return {"type": "tool_use", "id": tool_use_id(call.id), "name": call.name, "input": json_object(call.arguments)}


def _event(kind: str, **fields) -> NamedEvent:
    return NamedEvent(kind, {"type": kind} | fields)


class MessagesWriter(Writer):
    """One message's frames; holds which block is open and its index.

    The opening (message_start) waits for the job's first event: when that
    is the prompt's size (PromptEvent), the opening carries it, as
    Anthropic's does; the finish carries the whole usage either way."""

    def __init__(self, message_id: str, model: str, request_id: str | None = None):
        self.message = {"id": message_id, "type": "message", "role": "assistant", "model": model}
        self.request_id = request_id
        self._started = False
        self._index = -1
        self._open: str | None = None  # the type of the block now open
        self._thoughts: list[str] = []  # the open thinking block's text, for its signature
        self._signature: str | None = None  # the upstream's signature of the open thinking block

    def answered_by(self, model: str) -> None:
        self.message["model"] = model

    def _begin(self, prompt: PromptEvent | None = None) -> list[Frame]:
        if self._started:
            return []
        self._started = True
        counts = usage(prompt.prompt_tokens, prompt.cached_tokens) if prompt else usage()
        return [_event("message_start", message=self.message | {
            "content": [], "stop_reason": None, "stop_sequence": None, "usage": counts})]

    def prompt(self, event: PromptEvent) -> list[Frame]:
        return self._begin(event)

    def _start(self, block: dict) -> list[Frame]:
        frames = self._begin() + self._close()
        self._index += 1
        self._open = block["type"]
        return frames + [_event("content_block_start", index=self._index, content_block=block)]

    def _close(self) -> list[Frame]:
        if self._open is None:
            return []
        frames = []
        if self._open == "thinking":  # the signature closes a thinking block
            signed = self._signature or signature("".join(self._thoughts))
            frames.append(self._delta({"type": "signature_delta", "signature": signed}))
            self._thoughts, self._signature = [], None
        self._open = None
        return frames + [_event("content_block_stop", index=self._index)]

    def _delta(self, delta: dict) -> NamedEvent:
        return _event("content_block_delta", index=self._index, delta=delta)

    def text(self, text: str) -> list[Frame]:
        frames = [] if self._open == "text" else self._start({"type": "text", "text": ""})
        return frames + [self._delta({"type": "text_delta", "text": text})]

    def thinking(self, text: str) -> list[Frame]:
        frames = [] if self._open == "thinking" else self._start({"type": "thinking", "thinking": "", "signature": ""})
        self._thoughts.append(text)
        return frames + [self._delta({"type": "thinking_delta", "thinking": text})]

    def thinking_signature(self, signature: str) -> list[Frame]:
        """An upstream's own signature, sent back as it came (it checks it)."""
        self._signature = signature
        return []

    def redacted_thinking(self, data: str) -> list[Frame]:
        """A block of its own, whole: no deltas (as Anthropic sends it)."""
        return self._start({"type": "redacted_thinking", "data": data}) + self._close()

    def tool_call(self, call: ToolCallEvent) -> list[Frame]:
        """A call arrives whole: its block opens, its input comes as one
        delta (Anthropic's clients join partial_json pieces), and it closes."""
        frames = self._start(_tool_use_block(call) | {"input": {}})
        frames.append(self._delta({"type": "input_json_delta", "partial_json": call.arguments}))
        return frames + self._close()

    def server_tool(self, event: ServerToolEvent) -> list[Frame]:
        return self._begin() + [server_tool_comment(event)]  # a comment: the SDKs' SSE readers skip it

    def finish(self, done: DoneEvent) -> list[Frame]:
        return self._begin() + self._close() + [
            _event("message_delta", delta={"stop_reason": stop_reason(done), "stop_sequence": done.stop_sequence},
                   usage=final_usage(done)),
            _event("message_stop")]

    def error(self, error: SwitchboardError) -> list[Frame]:
        return [NamedEvent("error", self.error_body(error))]

    def error_body(self, error: SwitchboardError) -> dict:
        return error_body(error, self.request_id)

    def keepalive(self) -> list[Frame]:
        return self._begin() + [PING]

    def reply(self, transcript: Transcript) -> dict:
        done = transcript.done
        signed = transcript.signature or signature(transcript.thinking)
        content = [{"type": "thinking", "thinking": transcript.thinking, "signature": signed}] if transcript.thoughts \
            else []
        content += [{"type": "redacted_thinking", "data": data} for data in transcript.redacted]
        content += [{"type": "text", "text": transcript.text}] if transcript.text else []
        content += [_tool_use_block(call) for call in transcript.calls]
        return self.message | {"content": content, "stop_reason": stop_reason(done),
                               "stop_sequence": done.stop_sequence, "usage": final_usage(done)} \
            | reply_extensions(transcript)


class TokenCountWriter(Writer):
    """/v1/messages/count_tokens: the worker's count of the prompt."""

    error_body = staticmethod(error_body)

    def reply(self, transcript: Transcript) -> dict:
        return {"input_tokens": transcript.done.usage.prompt_tokens}


def model_object(name: str, display_name: str, created_at: str) -> dict:
    return {"type": "model", "id": name, "display_name": display_name, "created_at": created_at}


def model_page(models: list[dict], args) -> dict:
    """One page of Anthropic's model list: `limit` (default 20, at most
    1000) models after `after_id` or before `before_id`."""
    ids = [model["id"] for model in models]
    start, end = 0, len(models)
    if args.get("after_id") in ids:
        start = ids.index(args["after_id"]) + 1
    if args.get("before_id") in ids:
        end = ids.index(args["before_id"])
    limit = str(args.get("limit", "20"))
    limit = max(1, min(1000, int(limit))) if limit.isdigit() else 20
    page = models[start:end][-limit:] if "before_id" in args else models[start:end][:limit]
    return {"data": page, "has_more": len(page) < len(models[start:end]),
            "first_id": page[0]["id"] if page else None, "last_id": page[-1]["id"] if page else None}
