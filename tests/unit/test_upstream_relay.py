"""The upstream backends' relays (workers/backends/openai_upstream.py,
ollama_upstream.py) over scripted arrivals: what arrived together goes on
as one piece, in order, and the counts stay per token."""
from __future__ import annotations

import json

from catalog.upstream import UpstreamSettings
from tests.unit.generators import drained
from workers.backends.ollama_upstream import OllamaUpstreamBackend
from workers.backends.openai_upstream import OpenAIUpstreamBackend
from workers.model_output import Outcome, Thinking

SETTINGS = UpstreamSettings(base_url="http://127.0.0.1:9", upstream_model="m", context_length=1)


class Arrivals:
    """A response whose body came in these reads."""
    elapsed_before_body = 0.0

    def __init__(self, *reads: list[str]):
        self._reads = reads

    def arrivals(self, time_left=None):
        yield from self._reads


def run(relay) -> tuple[list, Outcome]:
    return drained(relay)


def sse(delta: dict, finish: str | None = None) -> list[str]:
    return [f"data: {json.dumps({'choices': [{'delta': delta, 'finish_reason': finish}]})}", ""]


def test_openai_chunks_that_arrived_together_are_one_piece_and_thinking_keeps_its_place():
    response = Arrivals(sse({"content": "a"}) + sse({"content": "b"}) + sse({"content": "c"}),
                        sse({"content": "d"}) + sse({"reasoning_content": "t"}) + sse({"content": "e"}, "stop")
                        + ["data: [DONE]", ""])
    pieces, outcome = run(OpenAIUpstreamBackend("m", SETTINGS).relay(response, None))
    assert pieces == ["abc", "d", Thinking("t"), "e"]
    assert outcome == Outcome("stop", 0, 6)  # no usage sent: one token a chunk


def test_vllm_names_the_stop_sequence_that_fired():
    def last(stop_reason) -> list[str]:
        chunk = {"choices": [{"delta": {}, "finish_reason": "stop", "stop_reason": stop_reason}]}
        return [f"data: {json.dumps(chunk)}", "", "data: [DONE]", ""]
    for stop_reason, fired in (("END", "END"), (128009, None), (None, None)):  # a string, a token id, nothing
        _, outcome = run(OpenAIUpstreamBackend("m", SETTINGS).relay(Arrivals(sse({"content": "a"}) + last(
            stop_reason)), None))
        assert outcome.stop_sequence == fired


def test_the_prompt_tokens_an_upstream_read_from_its_cache_are_counted():
    def ending(details) -> list[str]:
        usage = {"prompt_tokens": 900, "completion_tokens": 1, "prompt_tokens_details": details}
        return [f"data: {json.dumps({'choices': [], 'usage': usage})}", "", "data: [DONE]", ""]
    for details, cached in (({"cached_tokens": 768}, 768), (None, None), ({"cached_tokens": "768"}, None)):
        _, outcome = run(OpenAIUpstreamBackend("m", SETTINGS).relay(Arrivals(sse({"content": "a"}, "stop")
                                                                             + ending(details)), None))
        assert (outcome.prompt_tokens, outcome.cached_tokens) == (900, cached)


def ndjson(message: dict, **fields) -> str:
    return json.dumps({"message": message, **fields})


def test_ollama_lines_that_arrived_together_are_one_piece_and_thinking_keeps_its_place():
    response = Arrivals([ndjson({"content": "a"}), ndjson({"content": "b"})],
                        [ndjson({"content": "c"}), ndjson({"thinking": "t"}), ndjson({"content": "d"}),
                         ndjson({"content": ""}, done=True, done_reason="stop", prompt_eval_count=3, eval_count=9)])
    pieces, outcome = run(OllamaUpstreamBackend("m", SETTINGS).relay(response, None))
    assert pieces == ["ab", "c", Thinking("t"), "d"]
    assert outcome == Outcome("stop", 3, 9)
