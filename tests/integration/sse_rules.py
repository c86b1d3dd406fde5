"""The OpenAI streaming rules Copilot's parser and the openai SDK rely on,
checked on a whole stream. A comment frame (`: keep-alive`, sent while a
job waits for its first token) is skipped, as Copilot's parser and the
openai SDK skip lines that start with a colon."""
from __future__ import annotations

import json


def parse_sse(body: bytes) -> list[dict]:
    assert b"\r" not in body
    frames = [f for f in body.split(b"\n\n") if not is_comment(f)]
    assert frames[-2:] == [b"data: [DONE]", b""], frames[-3:]
    malformed = [f for f in frames[:-2] if not f.startswith(b"data: {") or b"\n" in f]
    assert not malformed, malformed
    return [json.loads(f.removeprefix(b"data: ")) for f in frames[:-2]]


def is_comment(frame: bytes) -> bool:
    """A frame of comment lines only (each starting with a colon)."""
    return frame != b"" and all(line.startswith(b":") for line in frame.split(b"\n"))


def assert_well_formed(chunks: list[dict], include_usage: bool) -> None:
    if include_usage:
        usage = chunks[-1]["usage"]
        assert chunks[-1]["choices"] == [] and set(usage) - {"prompt_tokens_details"} == {
            "prompt_tokens", "completion_tokens", "total_tokens"}
        if "prompt_tokens_details" in usage:  # local models: OpenAI's shape for tokens from the prompt cache
            assert set(usage["prompt_tokens_details"]) == {"cached_tokens"}
            assert 0 <= usage["prompt_tokens_details"]["cached_tokens"] <= usage["prompt_tokens"]
        chunks = chunks[:-1]
    assert len({c["id"] for c in chunks}) == 1
    choices = [c["choices"][0] for c in chunks]
    assert choices[0]["delta"]["role"] == "assistant"
    assert all(c["finish_reason"] is None for c in choices[:-1])
    finish = choices[-1]["finish_reason"]
    assert finish in ("stop", "length", "tool_calls") and choices[-1]["delta"] == {}
    pieces = [(i, d["tool_calls"]) for i, d in enumerate(c["delta"] for c in choices) if "tool_calls" in d]
    if pieces:
        assert finish == "tool_calls"
        assert all("content" not in c["delta"] for c in choices[pieces[0][0]:])
        expected_index = 0
        for n, (_, calls) in enumerate(pieces):
            assert len(calls) == 1
            call = calls[0]
            if n % 2 == 0:
                assert set(call) == {"index", "id", "type", "function"} and call["index"] == expected_index
                assert call["function"]["arguments"] == "" and call["function"]["name"]
            else:
                assert set(call) == {"index", "function"} and call["index"] == expected_index
                assert isinstance(json.loads(call["function"]["arguments"]), dict)
                expected_index += 1
    else:
        assert finish in ("stop", "length")
