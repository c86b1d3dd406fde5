"""Gemini API dialect writer: GenerateContentResponse objects, Google's
error envelope, token counts, embeddings and the model list.

A stream is a series of whole GenerateContentResponse objects, each with
the parts that arrived since the last (a text's next piece, a function
call whole, a thought when `includeThoughts` asked for them); the last
carries `finishReason` and `usageMetadata`. Framed as SSE (`?alt=sse`) or
as the elements of one JSON array (app/streaming.py's `JsonArray`). An
error after the first byte is one more element: `{"error": {...}}`, as
Google's own streams end. No SSE comments: Google's Python SDK takes every
line but `data:` and empty ones for JSON (its keep-alive is an empty line).
"""
from __future__ import annotations

from dialects.writer import BLANK_LINE, Frame, Transcript, Writer, reply_extensions
from protocol.contract import json_object
from protocol.events import DoneEvent, FinishReason, ServerToolEvent, ToolCallEvent
from protocol.errors import SwitchboardError

_STATUSES = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
             405: "UNIMPLEMENTED", 409: "ABORTED", 413: "INVALID_ARGUMENT", 429: "RESOURCE_EXHAUSTED",
             499: "CANCELLED", 500: "INTERNAL", 501: "UNIMPLEMENTED", 502: "UNAVAILABLE", 503: "UNAVAILABLE",
             504: "DEADLINE_EXCEEDED", 529: "UNAVAILABLE"}
GENERATION_METHODS = ["generateContent", "streamGenerateContent", "countTokens"]
EMBEDDING_METHODS = ["embedContent", "batchEmbedContents"]


def error_body(error: SwitchboardError) -> dict:
    status = _STATUSES.get(error.status, "INTERNAL" if error.status >= 500 else "INVALID_ARGUMENT")
    return {"error": {"code": error.status, "message": error.message, "status": status}}


def finish_reason(done: DoneEvent) -> str:
    return {FinishReason.LENGTH: "MAX_TOKENS", FinishReason.MALFORMED_CALL: "MALFORMED_FUNCTION_CALL"}.get(
        done.reason, "STOP")


def usage_metadata(done: DoneEvent) -> dict:
    """Google's counts: candidates are the reply without its thinking, which is counted apart."""
    counts = done.usage
    thoughts = min(counts.reasoning_tokens, counts.completion_tokens)
    metadata = {"promptTokenCount": counts.prompt_tokens, "candidatesTokenCount": counts.completion_tokens - thoughts,
                "totalTokenCount": counts.prompt_tokens + counts.completion_tokens}
    if thoughts:
        metadata["thoughtsTokenCount"] = thoughts
    if counts.cached_tokens:
        metadata["cachedContentTokenCount"] = counts.cached_tokens
    return metadata


def function_call_part(call: ToolCallEvent, with_id: bool) -> dict:
    """A call; its id only for a client that sends ids back (Google's own calls carry none)."""
    body = {"name": call.name, "args": json_object(call.arguments)}
    return {"functionCall": ({"id": call.id} if with_id else {}) | body}


class GenerateContentWriter(Writer):
    """One reply's GenerateContentResponse objects. `thoughts`: the client
    asked for them (includeThoughts); `call_ids`: its calls carried ids."""

    def __init__(self, model: str, response_id: str, thoughts: bool = False, call_ids: bool = False):
        self.model, self.response_id = model, response_id
        self._thoughts, self._call_ids = thoughts, call_ids
        self._signature: str | None = None  # a Gemini upstream's, for the next part

    def _signed(self, part: dict) -> dict:
        """A Gemini upstream's thought signature goes on the part after it, as Google sends it (its
        clients send it back with that part)."""
        signature, self._signature = self._signature, None
        return part | {"thoughtSignature": signature} if signature else part

    def _response(self, parts: list[dict], **candidate) -> dict:
        return {"candidates": [{"content": {"parts": parts, "role": "model"}} | candidate | {"index": 0}],
                "modelVersion": self.model, "responseId": self.response_id}

    def text(self, text: str) -> list[Frame]:
        return [self._response([{"text": text}])] if text else []

    def thinking(self, text: str) -> list[Frame]:
        return [self._response([{"text": text, "thought": True}])] if self._thoughts and text else []

    def thinking_signature(self, signature: str) -> list[Frame]:
        self._signature = signature
        return []

    def tool_call(self, call: ToolCallEvent) -> list[Frame]:
        return [self._response([self._signed(function_call_part(call, self._call_ids))])]

    def server_tool(self, event: ServerToolEvent) -> list[Frame]:
        return []  # Google's Python SDK reads an SSE comment as JSON: its whole reply lists them (server_tools)

    def keepalive(self) -> list[Frame]:
        return [BLANK_LINE]

    def finish(self, done: DoneEvent) -> list[Frame]:
        """The last object: an empty text part (as Google's last chunk has), the reason and the counts."""
        return [self._response([self._signed({"text": ""})], finishReason=finish_reason(done)) | {
            "usageMetadata": usage_metadata(done)}]

    error_body = staticmethod(error_body)

    def reply(self, transcript: Transcript) -> dict:
        parts = [{"text": transcript.thinking, "thought": True}] if self._thoughts and transcript.thoughts else []
        parts += [{"text": transcript.text}] if transcript.text or not transcript.calls else []
        self._signature = transcript.signature
        parts += [self._signed(function_call_part(call, self._call_ids)) for call in transcript.calls]
        done = transcript.done
        return self._response(parts, finishReason=finish_reason(done)) | {"usageMetadata": usage_metadata(done)} \
            | reply_extensions(transcript)


class TokenCountWriter(Writer):
    """countTokens: the worker's count of the prompt."""

    error_body = staticmethod(error_body)

    def reply(self, transcript: Transcript) -> dict:
        return {"totalTokens": transcript.done.usage.prompt_tokens}


def model_object(name: str, context_length: int, output_limit: int, embeds: bool, thinks: bool) -> dict:
    """A served model in Google's shape (`models/<id>`)."""
    return {"name": f"models/{name}", "baseModelId": name, "version": "001", "displayName": name,
            "description": f"{name}, served by Switchboard", "inputTokenLimit": context_length,
            "outputTokenLimit": output_limit,
            "supportedGenerationMethods": EMBEDDING_METHODS if embeds else GENERATION_METHODS, "thinking": thinks}


def model_page(models: list[dict], page_size: str | None, page_token: str | None) -> dict:
    """One page of the list: `pageSize` models (default 50, at most 1000)
    after the one `pageToken` names (the last name of the page before)."""
    names = [m["name"] for m in models]
    start = names.index(page_token) + 1 if page_token in names else 0
    size = max(1, min(1000, int(page_size))) if page_size and page_size.isdigit() else 50
    page = models[start:start + size]
    more = start + size < len(models)
    return {"models": page} | ({"nextPageToken": page[-1]["name"]} if more else {})


def embedding_object(vector: list[float]) -> dict:
    return {"values": vector}
