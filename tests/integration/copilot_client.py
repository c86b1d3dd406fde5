"""How VS Code Copilot Chat reads a chat completion stream from a BYOK
provider, ported from its source (microsoft/vscode-copilot-chat) so tests
can check what a Copilot user would see:

- src/platform/networking/node/stream.ts, SSEProcessor.processSSE: lines
  split on "\\n"; ":" comments skipped; `data: [DONE]` finishes every pending
  answer with reason "DONE" (finishSolutions); an object without `choices`
  but with `error` is a finished completion of reason "error" (ServerError)
  carrying that error; a choice with a `finish_reason` finishes its answer
  with that reason.
- src/extension/prompt/node/chatMLFetcher.ts, processSuccessfulResponse:
  any completion with a success reason (stop, client-trimmed, function_call,
  tool_calls) makes the reply a success; otherwise the FIRST completion
  decides: "error" -> Failed with streamError = its error, "length" ->
  "Response too long.", anything else -> "Response contained no choices."
- src/extension/byok/node/openAIEndpoint.ts, hydrateBYOKErrorMessages: a
  Failed reply with a streamError shows JSON.stringify(streamError).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

SUCCESS = {"stop", "client-trimmed", "function_call", "tool_calls"}


@dataclass
class Completion:
    index: int
    reason: str
    text: str = ""
    error: dict | None = None


@dataclass
class CopilotView:
    kind: str  # success, failed, length, no_choices
    shown: str
    completions: list[Completion] = field(default_factory=list)


def completions(body: bytes) -> list[Completion]:
    texts: dict[int, str] = {}
    pending: set[int] = set()
    out: list[Completion] = []
    for line in body.decode().split("\n"):
        if not line or line.startswith(":"):
            continue
        data = line[len("data:"):].strip()
        if data == "[DONE]":
            out += [Completion(i, "DONE", texts.get(i, "")) for i in sorted(pending)]
            return out
        chunk = json.loads(data)
        if not chunk.get("choices"):
            if chunk.get("error") is not None:
                out.append(Completion(0, "error", error=chunk["error"]))
            continue
        for choice in chunk["choices"]:
            index = choice["index"]
            pending.add(index)
            texts[index] = texts.get(index, "") + ((choice.get("delta") or {}).get("content") or "")
            if choice.get("finish_reason"):
                out.append(Completion(index, choice["finish_reason"], texts[index]))
                pending.discard(index)
    return out + [Completion(i, "Iteration Done", texts.get(i, "")) for i in sorted(pending)]


def what_copilot_shows(body: bytes) -> CopilotView:
    finished = completions(body)
    successes = [c for c in finished if c.reason in SUCCESS]
    if successes:
        return CopilotView("success", successes[0].text, finished)
    first = finished[0] if finished else None
    if first is not None and first.reason == "error":
        shown = json.dumps(first.error) if first.error else "Server error. Stream terminated"
        return CopilotView("failed", shown, finished)
    if first is not None and first.reason == "length":
        return CopilotView("length", "Response too long.", finished)
    return CopilotView("no_choices", "Response contained no choices.", finished)
