"""OpenAI Responses dialect writer: the response object, and its stream of
named events in OpenAI's documented order.

`response.created`, `response.in_progress`, then per output item
`response.output_item.added`, its parts and deltas, `response.output_item
.done` (one item open at a time), and one terminal event:
`response.completed`, `response.incomplete` (the token limit) or
`response.failed` (any error after the stream began: Codex reports "stream
closed before response.completed" when none comes). Every event carries its
type and a rising `sequence_number`; there is no `[DONE]`.
"""
from __future__ import annotations

import json
from typing import Callable

from dialects import openai_writer
from dialects.tools import custom_input
from dialects.writer import Frame, NamedEvent, Transcript, Writer, server_tool_comment
from protocol.events import DoneEvent, FinishReason, ServerToolEvent, ToolCallEvent
from protocol.errors import PromptTooLong, SwitchboardError

# Codex compacts its conversation on this code, and retries on the others.
_CODES = {429: "rate_limit_exceeded"}


def error_code(error: SwitchboardError) -> str:
    return "context_length_exceeded" if isinstance(error, PromptTooLong) else _CODES.get(error.status, "server_error")


def error_message(error: SwitchboardError) -> str:
    if error.retry_after is not None and error.status == 429:  # Codex reads the wait from the words
        return f"{error.message}. Please try again in {error.retry_after}s."
    return error.message


def error_body(error: SwitchboardError) -> dict:
    """Before the stream: OpenAI's error object, its code where one applies."""
    body = openai_writer.error_body(error)
    body["error"]["message"] = error_message(error)
    if isinstance(error, PromptTooLong) or error.status in _CODES:
        body["error"]["code"] = error_code(error)
    elif getattr(error, "code", None):  # an error with OpenAI's own code (previous_response_not_found)
        body["error"]["code"] = error.code
    return body


def usage(done: DoneEvent) -> dict:
    prompt, completion = done.usage.prompt_tokens, done.usage.completion_tokens
    return {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": done.usage.cached_tokens or 0},
            "output_tokens": completion, "output_tokens_details": {"reasoning_tokens": done.usage.reasoning_tokens},
            "total_tokens": prompt + completion}


def _suffix(call_id: str) -> str:
    return call_id.removeprefix("call_")


def call_item(call: ToolCallEvent, custom: bool, namespace: str | None = None) -> dict:
    """A function call, or a custom tool's call with its one text input; a
    namespaced tool's call names its namespace (Codex routes a call of an MCP
    server's tool, `mcp__<server>`, by it)."""
    if custom:
        return {"type": "custom_tool_call", "id": f"ctc_{_suffix(call.id)}", "status": "completed",
                "call_id": call.id, "name": call.name, "input": custom_input(call.arguments)}
    return {"type": "function_call", "id": f"fc_{_suffix(call.id)}", "status": "completed", "call_id": call.id,
            "name": call.name, **({"namespace": namespace} if namespace else {}), "arguments": call.arguments}


def message_item(item_id: str, text: str, status: str = "completed") -> dict:
    return {"type": "message", "id": item_id, "status": status, "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}] if status == "completed" else []}


def reasoning_item(item_id: str, text: str, sealed: str | None = None) -> dict:
    item = {"type": "reasoning", "id": item_id, "summary": [{"type": "summary_text", "text": text}] if text else []}
    return item | ({"encrypted_content": sealed} if sealed is not None else {})


class ResponsesWriter(Writer):
    """One response's events; holds the output so far and the open item."""

    def __init__(self, response_id: str, model: str, created_at: int, fields: dict,
                 custom_tools: frozenset[str] = frozenset(), on_final: Callable[[dict], None] | None = None):
        self.response = {"id": response_id, "object": "response", "created_at": created_at, "status": "in_progress",
                         "background": False, "error": None, "incomplete_details": None, "model": model,
                         "output": [], "usage": None, **fields}
        self.custom_tools = custom_tools
        self.namespaces: dict[str, str] = {}  # a namespaced tool's name -> its namespace's (its calls name it)
        self.on_final = on_final  # given the finished response (to store it)
        self._sequence = 0
        self._open: dict | None = None  # the item being streamed: its kind, id, index, text
        self._items = 0
        # With `include: ["reasoning.encrypted_content"]`: seals a reasoning item's text for the client to send back.
        self.seal_reasoning: Callable[[str], str] | None = None
        self._signature = ""  # the open reasoning's signature (an Anthropic upstream's)

    def answered_by(self, model: str) -> None:
        self.response["model"] = model

    def _event(self, kind: str, **fields) -> NamedEvent:
        event = NamedEvent(kind, {"type": kind, "sequence_number": self._sequence, **fields})
        self._sequence += 1
        return event

    def _snapshot(self, **changes) -> dict:
        return self.response | {"output": list(self.response["output"])} | changes

    def opening(self) -> list[Frame]:
        """Created and in progress; in the background, created was said when
        it was queued (`queued`), and in progress comes with its first event."""
        return ([] if self.response["background"] else self.queued()) + [
            self._event("response.in_progress", response=self._snapshot())]

    def queued(self) -> list[Frame]:
        status = "queued" if self.response["background"] else "in_progress"
        return [self._event("response.created", response=self._snapshot(status=status))]

    # --- items ---------------------------------------------------------------------
    def _item_id(self, prefix: str) -> str:
        self._items += 1
        return f"{prefix}_{self.response['id'].removeprefix('resp_')}_{self._items}"

    def _start(self, kind: str, item: dict) -> list[Frame]:
        frames = self._close()
        self._open = {"kind": kind, "id": item["id"], "index": len(self.response["output"]), "text": []}
        return frames + [self._event("response.output_item.added", output_index=self._open["index"], item=item)]

    def _where(self) -> dict:
        return {"item_id": self._open["id"], "output_index": self._open["index"]}

    def _close(self) -> list[Frame]:
        if self._open is None:
            return []
        open_item, self._open = self._open, None
        text = "".join(open_item["text"])
        where = {"item_id": open_item["id"], "output_index": open_item["index"]}
        if open_item["kind"] == "message":
            part = {"type": "output_text", "text": text, "annotations": []}
            frames = [self._event("response.output_text.done", **where, content_index=0, text=text, logprobs=[]),
                      self._event("response.content_part.done", **where, content_index=0, part=part)]
            item = message_item(open_item["id"], text)
        else:
            part = {"type": "summary_text", "text": text}
            frames = [self._event("response.reasoning_summary_text.done", **where, summary_index=0, text=text),
                      self._event("response.reasoning_summary_part.done", **where, summary_index=0, part=part)]
            item = reasoning_item(open_item["id"], text, self._sealed(text))
        return frames + self._done(open_item["index"], item)

    def _done(self, index: int, item: dict) -> list[Frame]:
        self.response["output"].append(item)
        return [self._event("response.output_item.done", output_index=index, item=item)]

    def text(self, text: str) -> list[Frame]:
        frames = []
        if self._open is None or self._open["kind"] != "message":
            item_id = self._item_id("msg")
            frames = self._start("message", message_item(item_id, "", "in_progress"))
            frames.append(self._event("response.content_part.added", **self._where(), content_index=0,
                                      part={"type": "output_text", "text": "", "annotations": []}))
        self._open["text"].append(text)
        return frames + [self._event("response.output_text.delta", **self._where(), content_index=0, delta=text,
                                     logprobs=[])]

    def thinking(self, text: str) -> list[Frame]:
        """Reasoning as a reasoning item's summary (what Codex shows)."""
        frames = []
        if self._open is None or self._open["kind"] != "reasoning":
            item_id = self._item_id("rs")
            frames = self._start("reasoning", reasoning_item(item_id, ""))
            frames.append(self._event("response.reasoning_summary_part.added", **self._where(), summary_index=0,
                                      part={"type": "summary_text", "text": ""}))
        self._open["text"].append(text)
        return frames + [self._event("response.reasoning_summary_text.delta", **self._where(), summary_index=0,
                                     delta=text)]

    def thinking_signature(self, signature: str) -> list[Frame]:
        self._signature = signature
        return []

    def _sealed(self, text: str) -> str | None:
        """The reasoning (and its signature) sealed, if the client asked for it."""
        if self.seal_reasoning is None:
            return None
        sealed, self._signature = self.seal_reasoning(json.dumps({"text": text, "signature": self._signature})), ""
        return sealed

    def tool_call(self, call: ToolCallEvent) -> list[Frame]:
        """A call arrives whole: its item opens, its arguments (a custom
        tool's input) come as one delta, and it is done."""
        custom = call.name in self.custom_tools
        item = call_item(call, custom, self.namespaces.get(call.name))
        frames = self._close()
        index = len(self.response["output"])
        where = {"item_id": item["id"], "output_index": index}
        frames.append(self._event("response.output_item.added", output_index=index,
                                  item=item | ({"input": ""} if custom else {"arguments": ""}) | {
                                      "status": "in_progress"}))
        if custom:
            frames += [self._event("response.custom_tool_call_input.delta", **where, delta=item["input"]),
                       self._event("response.custom_tool_call_input.done", **where, input=item["input"])]
        else:
            frames += [self._event("response.function_call_arguments.delta", **where, delta=call.arguments),
                       self._event("response.function_call_arguments.done", **where, name=call.name,
                                   arguments=call.arguments)]
        return frames + self._done(index, item)

    def server_tool(self, event: ServerToolEvent) -> list[Frame]:
        return [server_tool_comment(event)]  # a comment: SSE readers skip it

    # --- the end ---------------------------------------------------------------------
    def finish(self, done: DoneEvent) -> list[Frame]:
        frames = self._close()
        final = self._final(done)
        kind = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
        return frames + [self._event(kind, response=final)]

    def _final(self, done: DoneEvent) -> dict:
        incomplete = done.reason == FinishReason.LENGTH
        final = self._snapshot(status="incomplete" if incomplete else "completed", usage=usage(done),
                               incomplete_details={"reason": "max_output_tokens"} if incomplete else None)
        if self.on_final is not None:
            self.on_final(final)
        return final

    def error(self, error: SwitchboardError) -> list[Frame]:
        failed = self._snapshot(status="failed", error={"code": error_code(error), "message": error_message(error)})
        return self._close() + [self._event("response.failed", response=failed)]

    def reply(self, transcript: Transcript) -> dict:
        if transcript.thoughts:
            self._signature = transcript.signature or ""
            self.response["output"].append(reasoning_item(self._item_id("rs"), transcript.thinking,
                                                          self._sealed(transcript.thinking)))
        if transcript.text:
            self.response["output"].append(message_item(self._item_id("msg"), transcript.text))
        self.response["output"] += [call_item(call, call.name in self.custom_tools, self.namespaces.get(call.name))
                                    for call in transcript.calls]
        return self._final(transcript.done)

    error_body = staticmethod(error_body)


def compaction_item(item_id: str, sealed: str) -> dict:
    return {"type": "compaction", "id": item_id, "encrypted_content": sealed}


class CompactionWriter(ResponsesWriter):
    """A compaction's response (Codex's trigger item): the model's summary is
    gathered, never shown as text, and ends as one `compaction` item whose
    `encrypted_content` is the summary sealed (`seal(text)`); Codex expects
    exactly one such item."""

    def __init__(self, response_id: str, model: str, created_at: int, fields: dict, seal: Callable[[str], str],
                 on_final: Callable[[dict], None] | None = None):
        super().__init__(response_id, model, created_at, fields, on_final=on_final)
        self.seal, self._summary = seal, []

    def text(self, text: str) -> list[Frame]:
        self._summary.append(text)
        return []

    def thinking(self, text: str) -> list[Frame]:
        return []

    def tool_call(self, call: ToolCallEvent) -> list[Frame]:
        return []  # offered none

    def finish(self, done: DoneEvent) -> list[Frame]:
        item = compaction_item(self._item_id("cmp"), self.seal("".join(self._summary)))
        index = len(self.response["output"])
        frames = [self._event("response.output_item.added", output_index=index, item=item)] + self._done(index, item)
        final = self._final(done)
        return frames + [self._event("response.incomplete" if final["status"] == "incomplete"
                                     else "response.completed", response=final)]

    def reply(self, transcript: Transcript) -> dict:
        self.response["output"].append(compaction_item(self._item_id("cmp"), self.seal(transcript.text)))
        return self._final(transcript.done)
