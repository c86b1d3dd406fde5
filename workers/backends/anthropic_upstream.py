"""`anthropic`: an Anthropic-compatible server (Anthropic's API, or any
server of its Messages API): chat jobs on /v1/messages (the request is built
by dialects.anthropic), streamed as Anthropic's named SSE events; its
thinking (with the signatures it checks when they come back), tool use and
usage with cache reads read back into ours."""
from __future__ import annotations

import json

from dialects.anthropic import count_request, upstream_request
from protocol.contract import EmbedSpec, Job
from protocol.events import FinishReason
from protocol.errors import BackendError
from workers.backends.http_pool import Response
from workers.backends.transport import open_stream
from workers.backends.upstream import ErrorInStream, UpstreamBackend
from workers.cancel import Cancel
from workers.model_output import (
    Embedded, NativeCall, Outcome, Prompted, RedactedThinking, TextGenerator, Thinking,
)


class MessageStream:
    """One streamed message's events -> our pieces (text, Thinking with its
    signature, whole NativeCalls, the prompt's size first); the usage and
    the stop reason kept for the outcome. `feed` takes one event."""

    def __init__(self):
        self.usage: dict = {}
        self.stop_reason, self.stop_sequence = "end_turn", None
        self._call: dict | None = None  # the tool_use block being streamed
        self._arguments: list[str] = []

    def feed(self, event: dict) -> list:
        kind = event.get("type")
        if kind == "message_start":
            self.usage = (event.get("message") or {}).get("usage") or {}
            return [Prompted(self.prompt_tokens(), self.usage.get("cache_read_input_tokens"))]
        if kind == "content_block_start":
            block = event.get("content_block") or {}
            self._call, self._arguments = (block, []) if block.get("type") == "tool_use" else (None, [])
            if block.get("type") == "redacted_thinking":
                return [RedactedThinking(block.get("data", ""))]
            return [block["text"]] if block.get("type") == "text" and block.get("text") else []
        if kind == "content_block_delta":
            return self._delta(event.get("delta") or {})
        if kind == "content_block_stop" and self._call is not None:
            call, self._call = self._call, None
            arguments = "".join(self._arguments) or "{}"
            return [NativeCall(name=call.get("name", ""), arguments=arguments, id=call.get("id"))]
        if kind == "message_delta":
            self.usage |= {k: v for k, v in (event.get("usage") or {}).items() if v is not None}  # cumulative
            delta = event.get("delta") or {}
            self.stop_reason, self.stop_sequence = delta.get("stop_reason") or "end_turn", delta.get("stop_sequence")
        if kind == "error":
            error = event.get("error") or {}
            raise ErrorInStream(f"{error.get('type', 'error')}: {error.get('message', '')}")
        return []

    def _delta(self, delta: dict) -> list:
        kind = delta.get("type")
        if kind == "text_delta":
            return [delta.get("text", "")]
        if kind == "thinking_delta":
            return [Thinking(delta.get("thinking", ""))]
        if kind == "signature_delta":
            return [Thinking("", signature=delta.get("signature"))]
        if kind == "input_json_delta":
            self._arguments.append(delta.get("partial_json", ""))
        return []

    def prompt_tokens(self) -> int:
        """Anthropic counts cache reads and writes apart from input_tokens; ours is the whole prompt."""
        return sum(self.usage.get(k) or 0 for k in (
            "input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))

    def outcome(self) -> Outcome:
        reason = FinishReason.LENGTH if self.stop_reason == "max_tokens" else FinishReason.STOP
        return Outcome(reason, self.prompt_tokens(), self.usage.get("output_tokens", 0),
                       cached_tokens=self.usage.get("cache_read_input_tokens"),
                       stop_sequence=self.stop_sequence if self.stop_reason == "stop_sequence" else None)


class AnthropicUpstreamBackend(UpstreamBackend):
    name = "anthropic"
    health_path = "/v1/models"

    def request(self, job: Job) -> tuple[str, dict]:
        return upstream_request(job, self.settings.upstream_model)

    def job_headers(self, job: Job) -> dict[str, str]:
        """The client's betas, when it spoke Anthropic (Claude Code asks for its features so)."""
        return {"anthropic-beta": job.anthropic_beta} if job.anthropic_beta else {}

    def relay(self, response: Response, cancel: Cancel | None) -> TextGenerator:
        stream = MessageStream()
        yield from self.relay_fed(response, cancel, stream.feed)
        return stream.outcome()

    def count_tokens(self, job: Job) -> int:
        """The upstream's own count (its count_tokens endpoint); a server
        without one gets the estimate."""
        path, body = count_request(job, self.settings.upstream_model)
        try:
            with open_stream(self.upstream, path, body, None, self.job_headers(job)) as response:
                return int(json.loads(response.read())["input_tokens"])
        except BackendError as error:
            if error.status != 404:
                raise
        except (ValueError, KeyError, TypeError):
            raise BackendError(f"upstream {self.settings.upstream_name} sent a malformed token count", 502) from None
        return super().count_tokens(job)

    def embed(self, spec: EmbedSpec, cancel: Cancel | None = None) -> Embedded:
        raise BackendError(f'model "{self.model_name}" cannot make embeddings (the Messages API has none)', 400)


BACKEND = AnthropicUpstreamBackend
