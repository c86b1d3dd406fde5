"""`openai`: any OpenAI-compatible server (vLLM, llama.cpp, LM Studio, a
hosted API): chat jobs on /chat/completions, raw prompts (FIM, raw mode) on
/completions, streamed over SSE."""
from __future__ import annotations

import json
from typing import Iterator

import httpx

from workers.backends.base import Outcome, TextGenerator
from workers.backends.tool_deltas import ToolCallAssembler
from workers.backends.upstream import (
    UpstreamBackend, UpstreamSettings, mid_stream_error, tool_definitions, watched_lines,
)
from workers.cancel import Cancel
from workers.contract import Job, Message, ToolChoice
from workers.exceptions import BackendError


def _message(message: Message) -> dict:
    wire: dict = {"role": message.role, "content": message.content}
    if message.tool_calls:
        wire["content"] = message.content or None
        wire["tool_calls"] = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                              for c in message.tool_calls]
    if message.role == "tool":
        wire["tool_call_id"] = message.tool_call_id or ""
    return wire


def _tool_choice(choice: ToolChoice):
    if choice.mode == "function":
        return {"type": "function", "function": {"name": choice.name}}
    return choice.mode


def _response_format(output_format) -> dict | None:
    if output_format is None:
        return None
    if output_format == "json":
        return {"type": "json_object"}
    return {"type": "json_schema", "json_schema": {"name": "output", "schema": output_format}}


def request(job: Job, settings: UpstreamSettings) -> tuple[str, dict]:
    """Chat jobs go to /chat/completions, raw prompts to /completions."""
    options = job.options
    if job.prompt is not None:
        path, body = "/completions", {"model": settings.upstream_model, "prompt": job.prompt.prompt}
    else:
        path, body = "/chat/completions", {"model": settings.upstream_model,
                                           "messages": [_message(m) for m in job.messages],
                                           "response_format": _response_format(job.format)}
    body |= {
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": options.max_tokens,
        "temperature": options.temperature,
        "top_p": options.top_p,
        "seed": options.seed,
        "stop": options.stop or None,
    }
    if job.tools:
        body["tools"] = tool_definitions(job.tools)
        body["tool_choice"] = _tool_choice(job.tool_choice)
    return path, {k: v for k, v in body.items() if v is not None}


def sse_data(lines: Iterator[str]) -> Iterator[dict]:
    """The JSON payloads of an SSE stream, up to `data: [DONE]`; comments,
    `event:` lines and blank lines are skipped."""
    for line in lines:
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            _read_to_end(lines)
            return
        if data:
            yield json.loads(data)


def _read_to_end(lines: Iterator[str]) -> None:
    """Read the body to its end, normally just the closing chunk: httpx closes
    a connection whose body was left unread, and a new connection per job
    (TCP handshake, gevent's resolver thread) costs about a millisecond."""
    try:
        for _ in lines:
            pass
    except BackendError:  # an upstream that never ends its body: the reply is complete anyway
        pass


class OpenAIUpstreamBackend(UpstreamBackend):
    name = "openai"

    def request(self, job: Job) -> tuple[str, dict]:
        return request(job, self.settings)

    def relay(self, response: httpx.Response, cancel: Cancel | None) -> TextGenerator:
        calls, usage, finish, pieces = ToolCallAssembler(), {}, "stop", 0
        try:
            for chunk in sse_data(watched_lines(response, self.settings, cancel)):
                if "error" in chunk:
                    raise mid_stream_error(self.settings, json.dumps(chunk["error"]))
                usage = chunk.get("usage") or usage
                for choice in chunk.get("choices") or []:
                    delta = choice.get("delta") or {}
                    if delta.get("tool_calls"):
                        calls.add(delta["tool_calls"])
                        pieces += 1
                    text = delta.get("content") or choice.get("text")  # chat, or /completions
                    if text:
                        pieces += 1
                        yield text
                    finish = choice.get("finish_reason") or finish
        except ValueError:
            raise mid_stream_error(self.settings, "malformed SSE data") from None
        for call in calls.calls():
            yield call
        # Without usage (an upstream that rejects stream_options), count pieces:
        # OpenAI-compatible servers stream one token per chunk.
        return Outcome("length" if finish == "length" else "stop",
                       usage.get("prompt_tokens", 0), usage.get("completion_tokens", pieces))


BACKEND = OpenAIUpstreamBackend
