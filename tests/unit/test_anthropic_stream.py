"""An Anthropic upstream's stream events -> our pieces (MessageStream), fed
one event at a time, as the relay gets them."""
from __future__ import annotations

import pytest

from workers.backends.anthropic_upstream import ErrorInStream, MessageStream
from workers.model_output import NativeCall, Prompted, RedactedThinking, Thinking

START = {"type": "message_start", "message": {"usage": {
    "input_tokens": 5, "cache_creation_input_tokens": 2, "cache_read_input_tokens": 7, "output_tokens": 1}}}
EVENTS = [
    START,
    {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "hm"}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "S"}},
    {"type": "content_block_stop", "index": 0},
    {"type": "content_block_start", "index": 1, "content_block": {"type": "redacted_thinking", "data": "EnC"}},
    {"type": "content_block_stop", "index": 1},
    {"type": "ping"},
    {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Hi"}},
    {"type": "content_block_stop", "index": 1},
    {"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "r",
                                                                   "input": {}}},
    {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": '{"a": '}},
    {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "1}"}},
    {"type": "content_block_stop", "index": 2},
    {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None}, "usage": {"output_tokens": 9}},
    {"type": "message_stop"},
]


def test_a_whole_message_becomes_our_pieces_and_outcome():
    stream = MessageStream()
    pieces = [piece for event in EVENTS for piece in stream.feed(event)]
    assert pieces == [Prompted(14, 7), Thinking("hm"), Thinking("", signature="S"), RedactedThinking("EnC"), "Hi",
                      NativeCall(name="r", arguments='{"a": 1}', id="toolu_1")]
    outcome = stream.outcome()
    assert (outcome.reason, outcome.prompt_tokens, outcome.completion_tokens, outcome.cached_tokens) == (
        "stop", 14, 9, 7)


@pytest.mark.parametrize("stop, reason, sequence", [
    ({"stop_reason": "max_tokens"}, "length", None),
    ({"stop_reason": "stop_sequence", "stop_sequence": "END"}, "stop", "END"),
    ({"stop_reason": "end_turn"}, "stop", None),
], ids=["max-tokens", "stop-sequence", "end-turn"])
def test_stop_reasons(stop, reason, sequence):
    stream = MessageStream()
    for event in (START, {"type": "message_delta", "delta": stop, "usage": {"output_tokens": 3}}):
        stream.feed(event)
    assert (stream.outcome().reason, stream.outcome().stop_sequence) == (reason, sequence)


def test_an_error_event_is_raised():
    with pytest.raises(ErrorInStream, match="overloaded_error: Overloaded"):
        MessageStream().feed({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
