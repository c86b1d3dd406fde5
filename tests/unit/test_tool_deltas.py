"""Upstream tool-call delta shapes seen in the wild, reassembled."""
import pytest

from workers.backends.tool_deltas import ToolCallAssembler
from workers.model_output import NativeCall

A = NativeCall(name="read_file", arguments='{"filePath": "/a"}', id="call_a")
B = NativeCall(name="grep", arguments='{"q": "x"}', id="call_b")


def fn(name=None, arguments=None):
    return {k: v for k, v in {"name": name, "arguments": arguments}.items() if v is not None}


SHAPES = {
    "openai-sequential": [
        [{"index": 0, "id": "call_a", "type": "function", "function": fn("read_file", "")}],
        [{"index": 0, "function": fn(arguments='{"filePath"')}], [{"index": 0, "function": fn(arguments=': "/a"}')}],
        [{"index": 1, "id": "call_b", "type": "function", "function": fn("grep", '{"q": "x"}')}]],
    "whole-calls-in-one-chunk": [[
        {"index": 0, "id": "call_a", "function": fn("read_file", '{"filePath": "/a"}')},
        {"index": 1, "id": "call_b", "function": fn("grep", '{"q": "x"}')}]],
    "interleaved": [
        [{"index": 0, "id": "call_a", "function": fn("read_file", "")}],
        [{"index": 1, "id": "call_b", "function": fn("grep", "")}],
        [{"index": 0, "function": fn(arguments='{"filePath": ')}], [{"index": 1, "function": fn(arguments='{"q": ')}],
        [{"index": 0, "function": fn(arguments='"/a"}')}], [{"index": 1, "function": fn(arguments='"x"}')}]],
    "every-call-at-index-0": [
        [{"index": 0, "id": "call_a", "function": fn("read_file", '{"filePath"')}],
        [{"index": 0, "function": fn(arguments=': "/a"}')}],
        [{"index": 0, "id": "call_b", "function": fn("grep", '{"q": "x"}')}]],
    "repeated-id-and-name-on-every-piece": [
        [{"index": 0, "id": "call_a", "function": fn("read_file", '{"filePath": ')}],
        [{"index": 0, "id": "call_a", "function": fn("read_file", '"/a"}')}],
        [{"index": 1, "id": "call_b", "function": fn("grep", '{"q": "x"}')}]],
}


@pytest.mark.parametrize("chunks", SHAPES.values(), ids=SHAPES.keys())
def test_shapes_reassemble_to_the_same_calls(chunks):
    assembler = ToolCallAssembler()
    for pieces in chunks:
        assembler.add(pieces)
    assert assembler.calls() == [A, B]


def test_missing_ids_and_object_arguments_from_ollama():
    assembler = ToolCallAssembler()
    assembler.add([{"function": {"name": "read_file", "arguments": {"filePath": "/a"}}}])
    assembler.add([{"function": {"name": "grep", "arguments": {"q": "x"}}, "id": None, "index": 1}])
    assert [(c.id, c.name, c.arguments) for c in assembler.calls()] == [
        (None, "read_file", '{"filePath": "/a"}'), (None, "grep", '{"q": "x"}')]
