"""Section 14's tally of work and cache reads from the replies' usage (the
local model's run, which has no upstream to count them)."""
from __future__ import annotations

import json

from scripts.benchkit.agent_sessions import UPSTREAM, Traffic, _summarise
from scripts.benchkit.client import StreamResult, _summarize


def _reply(input_tokens: int, cached: int, output: int) -> StreamResult:
    """A reply as Anthropic's stream reports its usage (uncached input first, the output at the end)."""
    start = {"type": "message_start", "message": {"usage": {"input_tokens": input_tokens,
                                                            "cache_read_input_tokens": cached, "output_tokens": 1}}}
    delta = {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": output}}
    result = StreamResult(status=200)
    _summarize(b"".join(b"event: x\ndata: %s\n\n" % json.dumps(p).encode() for p in (start, delta)), result)
    return result


def test_a_sessions_later_turns_count_what_its_turn_before_sent_and_got_back():
    traffic = Traffic(0, UPSTREAM, [])
    for session, reply in (("p1-main", _reply(1000, 0, 8)), ("p0-side0-0", _reply(200, 100, 8)),
                           ("p1-main", _reply(52, 1008, 8)), ("p1-main", _reply(120, 1000, 8))):
        traffic.tally(session, reply)
    assert traffic.work == {
        "p1/main#first": {"read": 1000, "cached": 0, "cacheable": 0, "written": 8, "requests": 1},
        "p0/side0-0#first": {"read": 200, "cached": 100, "cacheable": 0, "written": 8, "requests": 1},
        "p1/main": {"read": 52 + 120, "cached": 2008, "cacheable": 1008 + 1068, "written": 16, "requests": 2}}
    summary = _summarise(traffic, traffic.work, 1.0)
    assert summary["cache_hit"] == round(2008 / 2076, 3)
    assert summary["shares"] == {"p0": round(208 / 1404, 3), "p1": round(1196 / 1404, 3)}  # read + written
