"""`openai`: any OpenAI-compatible server (vLLM, llama.cpp, LM Studio, a
hosted API): chat jobs on /chat/completions, raw prompts (FIM, raw mode) on
/completions (the request is built by dialects.openai), streamed over SSE."""
from __future__ import annotations

import json

from dialects import embeddings
from dialects.openai import upstream_request
from protocol.contract import EmbedSpec, Job
from protocol.events import FinishReason
from workers.backends.http_pool import Response
from workers.backends.sse import sse_payloads
from workers.backends.tool_deltas import ToolCallAssembler
from workers.backends.transport import watched_arrivals
from workers.backends.upstream import UpstreamBackend
from workers.backends.upstream_errors import mid_stream_error
from workers.cancel import Cancel
from workers.model_output import Outcome, TextGenerator, Thinking, flush_texts


class OpenAIUpstreamBackend(UpstreamBackend):
    name = "openai"
    health_path = "/models"

    def request(self, job: Job) -> tuple[str, dict]:
        return upstream_request(job, self.settings.upstream_model, getattr(self.settings, "custom_tools", False))

    def embed_request(self, spec: EmbedSpec) -> tuple[str, dict]:
        return embeddings.openai_upstream_request(spec, self.settings.upstream_model)

    def embed_vectors(self, body: dict) -> tuple[list[list[float]], int]:
        return embeddings.openai_upstream_vectors(body)

    def relay(self, response: Response, cancel: Cancel | None) -> TextGenerator:
        """The text of the chunks that arrived together goes on as one piece
        (one pass through the filters and the publisher, not one a token)."""
        calls, usage, finish, pieces, fired = ToolCallAssembler(), {}, "stop", 0, None
        try:
            for chunks in sse_payloads(watched_arrivals(response, self.settings, cancel)):
                texts: list[str] = []
                for chunk in chunks:
                    if "error" in chunk:
                        raise mid_stream_error(self.settings, json.dumps(chunk["error"]))
                    usage = chunk.get("usage") or usage
                    for choice in chunk.get("choices") or []:
                        delta = choice.get("delta") or {}
                        # vLLM's reasoning parsers and DeepSeek say reasoning_content; others reasoning
                        thinking = delta.get("reasoning_content") or delta.get("reasoning")
                        if thinking:
                            pieces += 1
                            yield from flush_texts(texts)
                            yield Thinking(thinking)
                        if delta.get("tool_calls"):
                            calls.add(delta["tool_calls"])
                            pieces += 1
                        text = delta.get("content") or choice.get("text")  # chat, or /completions
                        if text:
                            pieces += 1
                            texts.append(text)
                        finish = choice.get("finish_reason") or finish
                        # vLLM names the stop sequence that ended the reply (or a token id: not one of ours)
                        fired = choice.get("stop_reason") if isinstance(choice.get("stop_reason"), str) else fired
                yield from flush_texts(texts)
        except ValueError:
            raise mid_stream_error(self.settings, "malformed SSE data") from None
        for call in calls.calls():
            yield call
        return _outcome(usage, finish, pieces, fired)


def _outcome(usage: dict, finish: str, pieces: int, fired: str | None) -> Outcome:
    """What the stream ended with. Without usage (an upstream that rejects
    stream_options), pieces are counted: OpenAI-compatible servers stream
    one token per chunk."""
    details = usage.get("completion_tokens_details") or {}
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")  # OpenAI's and vLLM's prefix cache
    return Outcome(FinishReason.LENGTH if finish == "length" else FinishReason.STOP, usage.get("prompt_tokens", 0),
                   usage.get("completion_tokens", pieces), stop_sequence=fired if finish == "stop" else None,
                   reasoning_tokens=details.get("reasoning_tokens"),
                   cached_tokens=cached if isinstance(cached, int) and not isinstance(cached, bool) else None)


BACKEND = OpenAIUpstreamBackend
