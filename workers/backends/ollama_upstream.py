"""`ollama`: an upstream Ollama server: chat jobs on /api/chat, raw prompts
on /api/generate, streamed as NDJSON.

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


def request(job: Job, settings: UpstreamSettings) -> tuple[str, dict]:
    """Chat jobs go to /api/chat, raw prompts to /api/generate (raw: true)."""
    body = {"model": settings.upstream_model, "stream": True, "options": ollama_options(job.options)}
    if job.format is not None:
        body["format"] = job.format
    if job.keep_alive is not None:
        body["keep_alive"] = job.keep_alive
    if job.prompt is not None:
        return "/api/generate", body | {"prompt": job.prompt.prompt, "raw": True}
    body["messages"] = _messages(job.messages)
    if job.tools:
        body["tools"] = tool_definitions(job.tools)
    return "/api/chat", body


class OllamaUpstreamBackend(UpstreamBackend):
    name = "ollama"

    def request(self, job: Job) -> tuple[str, dict]:
        return request(job, self.settings)

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
                text = message.get("content") or last.get("response")  # /api/chat, or /api/generate
                if text:
                    count += 1
                    yield text
        except ValueError:
            raise mid_stream_error(self.settings, "malformed NDJSON") from None
        for call in calls.calls():
            yield call
        reason = "length" if last.get("done_reason") == "length" else "stop"
        return Outcome(reason, last.get("prompt_eval_count", 0), last.get("eval_count", count))


BACKEND = OllamaUpstreamBackend
