"""`gemini`: a server of Google's Gemini API (Google's own, or another
Switchboard's Gemini routes): chat jobs on :streamGenerateContent?alt=sse
(the request is built by dialects.gemini), each SSE event a whole
GenerateContentResponse; its text, thoughts (with their signature, sent back
on the next turn), function calls and usage read back into ours."""
from __future__ import annotations

import json

from dialects.gemini import count_request, upstream_request
from protocol.contract import EmbedSpec, Job
from protocol.events import FinishReason
from protocol.errors import BackendError, InvalidRequest
from workers.backends.http_pool import Response
from workers.backends.transport import open_stream
from workers.backends.upstream import ErrorInStream, UpstreamBackend
from workers.cancel import Cancel
from workers.model_output import NativeCall, Outcome, TextGenerator, Thinking


class ResponseStream:
    """One stream's GenerateContentResponse objects -> our pieces; the usage
    and the finish reason kept for the outcome. `feed` takes one object."""

    def __init__(self):
        self.usage: dict = {}
        self.finish = "STOP"

    def feed(self, response: dict) -> list:
        if "error" in response:
            error = response.get("error") or {}
            raise ErrorInStream(f"{error.get('status', 'error')}: {error.get('message', '')}")
        self.usage = response.get("usageMetadata") or self.usage
        pieces: list = []
        for candidate in (response.get("candidates") or [])[:1]:
            self.finish = candidate.get("finishReason") or self.finish
            for part in (candidate.get("content") or {}).get("parts") or []:
                pieces += self._part(part)
        return pieces

    @staticmethod
    def _part(part: dict) -> list:
        signature = part.get("thoughtSignature")
        pieces: list = [Thinking("", signature=signature)] if signature else []
        call = part.get("functionCall")
        if call:
            arguments = json.dumps(call.get("args") or {}, ensure_ascii=False)
            return pieces + [NativeCall(name=call.get("name", ""), arguments=arguments, id=call.get("id"))]
        text = part.get("text")
        if text:
            pieces.append(Thinking(text) if part.get("thought") else text)
        return pieces

    def outcome(self) -> Outcome:
        if self.finish == "MALFORMED_FUNCTION_CALL" or self.finish in ("SAFETY", "RECITATION", "BLOCKLIST",
                                                                       "PROHIBITED_CONTENT", "SPII"):
            raise BackendError(f"the upstream ended the reply: {self.finish}", 502)
        reason = FinishReason.LENGTH if self.finish == "MAX_TOKENS" else FinishReason.STOP
        thoughts = self.usage.get("thoughtsTokenCount") or 0
        return Outcome(reason, self.usage.get("promptTokenCount") or 0,
                       (self.usage.get("candidatesTokenCount") or 0) + thoughts,
                       cached_tokens=self.usage.get("cachedContentTokenCount"), reasoning_tokens=thoughts)


class GeminiUpstreamBackend(UpstreamBackend):
    name = "gemini"
    health_path = "/v1beta/models"

    def request(self, job: Job) -> tuple[str, dict]:
        return upstream_request(job, self.settings.upstream_model)

    def relay(self, response: Response, cancel: Cancel | None) -> TextGenerator:
        stream = ResponseStream()
        yield from self.relay_fed(response, cancel, stream.feed)
        return stream.outcome()

    def count_tokens(self, job: Job) -> int:
        """The upstream's own count (its countTokens)."""
        path, body = count_request(job, self.settings.upstream_model)
        try:
            with open_stream(self.upstream, path, body, None) as response:
                return int(json.loads(response.read())["totalTokens"])
        except (ValueError, KeyError, TypeError):
            raise BackendError(f"upstream {self.settings.upstream_name} sent a malformed token count", 502) from None

    def embed_request(self, spec: EmbedSpec) -> tuple[str, dict]:
        if spec.tokens is not None:
            raise InvalidRequest("input: token arrays cannot be passed to a Gemini API upstream; send text",
                                 param="input")
        model = self.settings.upstream_model
        return f"/v1beta/models/{model}:batchEmbedContents", {"requests": [
            {"model": f"models/{model}", "content": {"parts": [{"text": text}]}} for text in spec.inputs]}

    def embed_vectors(self, body: dict) -> tuple[list[list[float]], int]:
        return [item["values"] for item in body.get("embeddings") or []], 0


BACKEND = GeminiUpstreamBackend
