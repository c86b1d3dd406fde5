"""`ollama`: an upstream Ollama server: chat jobs on /api/chat, raw prompts
on /api/generate (the request is built by dialects.ollama), streamed as
NDJSON; its whole tool calls are reassembled into ours."""
from __future__ import annotations

from dialects import embeddings
from dialects.ollama import upstream_request
from protocol.contract import EmbedSpec, Job
from protocol.events import FinishReason
from workers.backends import wire_json
from workers.backends.http_pool import Response
from workers.backends.tool_deltas import ToolCallAssembler
from workers.backends.transport import watched_arrivals
from workers.backends.upstream import UpstreamBackend
from workers.backends.upstream_errors import mid_stream_error
from workers.cancel import Cancel
from workers.model_output import Outcome, TextGenerator, Thinking, flush_texts


class OllamaUpstreamBackend(UpstreamBackend):
    name = "ollama"
    health_path = "/api/version"

    def request(self, job: Job) -> tuple[str, dict]:
        return upstream_request(job, self.settings.upstream_model)

    def embed_request(self, spec: EmbedSpec) -> tuple[str, dict]:
        return embeddings.ollama_upstream_request(spec, self.settings.upstream_model)

    def embed_vectors(self, body: dict) -> tuple[list[list[float]], int]:
        return embeddings.ollama_upstream_vectors(body)

    def relay(self, response: Response, cancel: Cancel | None) -> TextGenerator:
        """The text of the lines that arrived together goes on as one piece."""
        calls, last, count = ToolCallAssembler(), {}, 0
        try:
            for lines in watched_arrivals(response, self.settings, cancel):
                texts: list[str] = []
                for line in lines:
                    if not line.strip():
                        continue
                    last = wire_json.loads(line)
                    if "error" in last:
                        raise mid_stream_error(self.settings, last["error"])
                    message = last.get("message") or {}
                    thinking = message.get("thinking") or last.get("thinking")  # /api/chat, or /api/generate
                    if thinking:
                        count += 1
                        yield from flush_texts(texts)
                        yield Thinking(thinking)
                    for call in message.get("tool_calls") or []:
                        calls.add([{"index": count, **call}])  # Ollama sends each call whole
                        count += 1
                    text = message.get("content") or last.get("response")  # /api/chat, or /api/generate
                    if text:
                        count += 1
                        texts.append(text)
                yield from flush_texts(texts)
        except ValueError:
            raise mid_stream_error(self.settings, "malformed NDJSON") from None
        for call in calls.calls():
            yield call
        reason = FinishReason.LENGTH if last.get("done_reason") == "length" else FinishReason.STOP
        return Outcome(reason, last.get("prompt_eval_count", 0), last.get("eval_count", count))


BACKEND = OllamaUpstreamBackend
