"""2. The local model: SmolLM2-135M from the same GGUF, taking turns: a
direct in-process llama_cpp call (the floor), Switchboard's `llamacpp`
backend called in-process (its own cost), llama-cpp-python's own
OpenAI-compatible server, and Switchboard served (`llamacpp` backend).

Same prompt, greedy sampling, repeat penalty, seed and token limit
everywhere, so all of them generate the same tokens (checked: the texts must
match). Tokens per
second is the decode rate: (tokens - 1) / (end - first token).
"""
from __future__ import annotations

import time

from scripts.benchkit.client import StreamResult, stream
from scripts.benchkit.stack import LLAMA_KEY, Endpoints
from scripts.benchkit.stats import summary
from catalog.llamacpp import smollm2_gguf

MESSAGES = [{"role": "user", "content": "Write a long story about a brave knight who meets a dragon."}]
SAMPLING = {"temperature": 0.0, "seed": 42}
WAYS = ("direct", "switchboard backend, in-process", "llama-cpp-python server", "switchboard")


def direct_llama():
    from llama_cpp import Llama

    return Llama(model_path=str(smollm2_gguf()), n_ctx=2048, verbose=False)


def _direct(llm, tokens: int) -> StreamResult:
    result, pieces, count = StreamResult(status=200), [], 0
    started = time.perf_counter()
    # Both servers apply a repeat penalty of 1.1 by default (Ollama's default,
    # and llama-cpp-python server's); the in-process call defaults to none.
    for chunk in llm.create_chat_completion(MESSAGES, stream=True, max_tokens=tokens, repeat_penalty=1.1,
                                            **SAMPLING):
        text = chunk["choices"][0]["delta"].get("content") or ""
        if text:
            count += 1
            result.ttft = result.ttft or time.perf_counter() - started
            pieces.append(text)
    result.total = time.perf_counter() - started
    result.text, result.completion_tokens = "".join(pieces), count
    return result


def _backend_in_process(backend, tokens: int) -> StreamResult:
    """Switchboard's llamacpp backend called in this process: the backend's
    own cost, without the serving around it."""
    from protocol.contract import Job, Message, SamplingOptions

    job = Job(id="bench", model="smollm2:135m", messages=[Message(**m) for m in MESSAGES],
              options=SamplingOptions(max_tokens=tokens, **SAMPLING))
    result, pieces = StreamResult(status=200), []
    started = time.perf_counter()
    generation = backend.generate(job)
    while True:
        try:
            piece = next(generation)
        except StopIteration as finished:
            result.completion_tokens = finished.value.completion_tokens
            break
        if isinstance(piece, str):  # (not the prompt's size, which comes before the first token)
            pieces.append(piece)
            result.ttft = result.ttft or time.perf_counter() - started
    result.total, result.text = time.perf_counter() - started, "".join(pieces)
    return result


async def _served(port: int, model: str, tokens: int, headers: dict) -> StreamResult:
    body = {"model": model, "stream": True, "messages": MESSAGES, "max_tokens": tokens,
            "stream_options": {"include_usage": True}, **SAMPLING}
    result = await stream(port, "/v1/chat/completions", body, headers)
    if result.completion_tokens is None:  # llama-cpp-python's server streams no usage: one token per chunk
        result.completion_tokens = result.text_frames
    return result


def decode_rate(result: StreamResult) -> float:
    return (result.completion_tokens - 1) / (result.total - result.ttft)


async def measure(endpoints: Endpoints, tokens: int, rounds: int) -> dict:
    from catalog.llamacpp import LlamaCppSettings
    from workers.backends.llamacpp import LlamaCppBackend

    llm, backend = direct_llama(), LlamaCppBackend("smollm2:135m", LlamaCppSettings(n_ctx=2048))
    runs: dict[str, list[StreamResult]] = {name: [] for name in WAYS}
    for round_index in range(rounds + 1):  # round 0 loads and warms every path up
        got = {"direct": _direct(llm, tokens), "switchboard backend, in-process": _backend_in_process(backend, tokens),
               "llama-cpp-python server": await _served(endpoints.llama_port, "smollm2", tokens,
                                                        {"Authorization": f"Bearer {LLAMA_KEY}"}),
               "switchboard": await _served(endpoints.web_port, "smollm2:135m", tokens, {})}
        if round_index:
            for name, result in got.items():
                runs[name].append(result)
    del llm, backend
    reference = runs["direct"][0].text
    return {name: {"ttft": summary([r.ttft for r in results]),
                   "tokens_per_second": summary([decode_rate(r) for r in results], scale=1.0),
                   "rounds": [decode_rate(r) for r in results],
                   "tokens": results[0].completion_tokens,
                   "same_text": all(r.text == reference for r in results),
                   "errors": [r.error for r in results if r.error]}
            for name, results in runs.items()}
