"""Thinking split out of text, thinking in each dialect's frames, and
images from either dialect, without a server."""
from __future__ import annotations

import base64

import pytest

from app.streaming import sse
from catalog.registry import parse_entry
from dialects import ollama_writer, openai_writer, simple_chat
from dialects.images import MAX_IMAGE_BYTES, from_base64, from_url
from dialects.writer import Transcript
from protocol.events import DoneEvent
from protocol.errors import InvalidRequest, RegistryError
from workers.model_output import Thinking
from workers.thinking import ThinkSplitter

TEXT = "Sure.<think>step one, step two</think>The answer<think>again</think> is 4."
EXPECTED = ["Sure.", Thinking("step one, step two"), "The answer", Thinking("again"), " is 4."]


def merged(pieces: list) -> list:
    out: list = []
    for piece in pieces:
        if out and type(out[-1]) is type(piece):
            out[-1] = out[-1] + piece if isinstance(piece, str) else Thinking(out[-1].text + piece.text)
        else:
            out.append(piece)
    return out


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, len(TEXT)])
def test_think_tags_split_however_the_text_is_cut(size):
    splitter = ThinkSplitter("<think>", "</think>")
    pieces = [p for i in range(0, len(TEXT), size) for p in splitter.feed(TEXT[i:i + size])] + splitter.finish()
    assert merged(pieces) == EXPECTED


def test_a_partial_tag_at_the_end_is_text_after_all():
    splitter = ThinkSplitter("<think>", "</think>")
    assert splitter.feed("a <thi") == ["a "] and splitter.finish() == ["<thi"]


def test_thinking_frames():
    chat = openai_writer.ChatWriter("c", "m", 1)
    head = '{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,'
    assert b"".join(map(sse, chat.thinking("hm"))) == (
        f'data: {head}"delta":{{"reasoning_content":"hm"}},"logprobs":null,"finish_reason":null}}]}}\n\n').encode()
    line = ollama_writer.ChatWriter("m").thinking("hm")[0]
    assert line["message"] == {"role": "assistant", "content": "", "thinking": "hm"} and line["done"] is False
    assert ollama_writer.GenerateWriter("m").thinking("hm")[0]["thinking"] == "hm"
    assert simple_chat.LinesWriter("c", "m", 1).thinking("hm")[0]["message"]["thinking"] == "hm"
    assert openai_writer.CompletionWriter("c", "m", 1).thinking("hm") == []
    whole = Transcript(["4"], [], DoneEvent(reason="stop"), thoughts=["a", "b"])
    assert chat.reply(whole)["choices"][0]["message"]["reasoning_content"] == "ab"
    assert ollama_writer.ChatWriter("m").reply(whole)["message"]["thinking"] == "ab"


PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(8)).decode()
JPEG = base64.b64encode(b"\xff\xd8\xff\xe0" + bytes(8)).decode()


def test_images():
    assert from_base64(PNG, "images.0").mime == "image/png" and from_base64(JPEG, "images.0").mime == "image/jpeg"
    assert from_url(f"data:image/webp;base64,{PNG}", "m").data_url() == f"data:image/webp;base64,{PNG}"
    with pytest.raises(InvalidRequest, match="remote image URLs are not fetched"):
        from_url("http://10.0.0.1/x.png", "m")
    with pytest.raises(InvalidRequest, match="must be a data URL"):
        from_url("file:///etc/passwd", "m")
    with pytest.raises(InvalidRequest, match=f"at most {MAX_IMAGE_BYTES} bytes"):
        from_base64(base64.b64encode(bytes(MAX_IMAGE_BYTES + 1)).decode(), "images.0")


def test_registry_vision_and_thinking():
    assert parse_entry("m", {"backend": "openai", "base_url": "http://h/v1", "upstream_model": "x",
                             "context_length": 8, "vision": True, "thinking": True}).capabilities == [
        "completion", "tools", "vision", "thinking"]
    assert "thinking" in parse_entry("m", {"backend": "echo", "think_tags": ["<think>", "</think>"]}).capabilities
    with pytest.raises(RegistryError, match='backend "echo" cannot take images'):
        parse_entry("m", {"backend": "echo", "vision": True})
