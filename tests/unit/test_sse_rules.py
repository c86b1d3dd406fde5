"""The integration tests' OpenAI stream rules (tests/integration/sse_rules.py)
on streams the real frame loop writes: a keep-alive comment before the first
token (a slow local model) is well formed, as Copilot's parser and the openai
SDK skip it; anything else that is not `data: {...}` is not."""
from __future__ import annotations

import pytest

from app.streaming import sse, stream
from dialects.openai_writer import ChatWriter
from protocol.events import DoneEvent, FinishReason, KeepAliveEvent, TextEvent, Usage
from tests.integration.sse_rules import assert_well_formed, parse_sse


def _body(*events) -> bytes:
    writer = ChatWriter("chatcmpl-1", "echo", 1, include_usage=True)
    return b"".join(stream(events, writer, sse))


ANSWER = (TextEvent(text="hi"), DoneEvent(reason=FinishReason.STOP, usage=Usage(prompt_tokens=3, completion_tokens=1)))


@pytest.mark.parametrize("events", [
    ANSWER,
    (KeepAliveEvent(), *ANSWER),
    (KeepAliveEvent(), KeepAliveEvent(), TextEvent(text="h"), KeepAliveEvent(), *ANSWER[1:]),
], ids=["no-keepalive", "keepalive-before-first-token", "keepalives-between-tokens"])
def test_keepalive_comments_are_well_formed(events):
    body = _body(*events)
    chunks = parse_sse(body)
    assert_well_formed(chunks, include_usage=True)
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"]) in ("hi", "h")


def test_the_keepalive_is_a_comment_frame_before_the_first_token():
    body = _body(KeepAliveEvent(), *ANSWER)
    assert body.index(b"\n\n: keep-alive\n\ndata: ") < body.index(b'"content":"hi"')


@pytest.mark.parametrize("body", [
    b"event: ping\n\ndata: [DONE]\n\n",  # a named event is not a comment
    b"data: {}\n: note\n\ndata: [DONE]\n\n",  # a comment line inside a data frame
    b": keep-alive\r\n\r\ndata: [DONE]\n\n",  # CR
], ids=["named-event", "comment-inside-frame", "crlf"])
def test_other_frames_are_still_malformed(body):
    with pytest.raises(AssertionError):
        parse_sse(body)
