"""`ollama`: an upstream Ollama server's /api/chat, streamed as NDJSON.

Ollama's tool calls carry object arguments and no ids, and its tool results
name the tool: both are converted to and from our JSON-text, id-matched form.
"""
from __future__ import annotations

import json

import httpx

from workers.backends.base import Outcome, TextGenerator
from workers.backends.tool_deltas import ToolCallAssembler
from workers.backends.upstream import (
    UpstreamBackend, UpstreamSettings, mid_stream_error, tool_definitions, watched_lines,
)
from workers.cancel import Cancel
from workers.contract import Job, Message, SamplingOptions, json_object

_OPTION_NAMES = {"max_tokens": "num_predict"}


def _messages(messages: list[Message]) -> list[dict]:
    names = {c.id: c.name for m in messages for c in m.tool_calls}
    wire = []
    for message in messages:
        item: dict = {"role": message.role, "content": message.content}
        if message.tool_calls:
            item["tool_calls"] = [{"function": {"name": c.name, "arguments": json_object(c.arguments)}}
                                  for c in message.tool_calls]
        if message.role == "tool":
            item["tool_name"] = message.tool_name or names.get(message.tool_call_id or "", "")
        wire.append(item)
    return wire


def ollama_options(options: SamplingOptions) -> dict:
    values = options.model_dump(exclude_none=True)
    if not values.get("stop"):
        values.pop("stop", None)
    return {_OPTION_NAMES.get(k, k): v for k, v in values.items()}


def request_body(job: Job, settings: UpstreamSettings) -> dict:
    body = {"model": settings.upstream_model, "messages": _messages(job.messages), "stream": True,
            "options": ollama_options(job.options)}
    if job.tools:
        body["tools"] = tool_definitions(job.tools)
    return body


class OllamaUpstreamBackend(UpstreamBackend):
    name = "ollama"
    path = "/api/chat"

    def request_body(self, job: Job) -> dict:
        return request_body(job, self.settings)

    def relay(self, response: httpx.Response, cancel: Cancel | None) -> TextGenerator:
        calls, last, count = ToolCallAssembler(), {}, 0
        try:
            for line in watched_lines(response, self.settings, cancel):
                if not line.strip():
                    continue
                last = json.loads(line)
                if "error" in last:
                    raise mid_stream_error(self.settings, last["error"])
                message = last.get("message") or {}
                for call in message.get("tool_calls") or []:
                    calls.add([{"index": count, **call}])  # Ollama sends each call whole
                    count += 1
                if message.get("content"):
                    count += 1
                    yield message["content"]
        except ValueError:
            raise mid_stream_error(self.settings, "malformed NDJSON") from None
        for call in calls.calls():
            yield call
        reason = "length" if last.get("done_reason") == "length" else "stop"
        return Outcome(reason, last.get("prompt_eval_count", 0), last.get("eval_count", count))


BACKEND = OllamaUpstreamBackend
