"""The incremental parser: same results whatever the chunking."""
from __future__ import annotations

import random

import pytest

from workers.toolcalls.parser import ParsedCall, ToolCallParser, merge_text

TOOLS = {"read_file", "create_file"}


def parse_in_pieces(text: str, cuts: list[int]) -> list:
    parser, items, last = ToolCallParser(TOOLS), [], 0
    for cut in sorted(cuts) + [len(text)]:
        items += parser.feed(text[last:cut])
        last = cut
    return merge_text(items + parser.finish())


INVOKE = '<invoke name="read_file"><parameter name="filePath">/a.ts</parameter><parameter name="startLine">1</parameter></invoke>'
CASES = {
    "plain": ("Just an answer, with { braces } and `code` and <b>tags</b>.", ["Just an answer, with { braces } and `code` and <b>tags</b>."]),
    "one-call": (INVOKE, [ParsedCall("read_file", {"filePath": "/a.ts", "startLine": "1"})]),
    "text-then-calls": ("Let me look.\n" + INVOKE + "\n" + INVOKE.replace("/a.ts", "/b.ts"),
                        ["Let me look.\n", ParsedCall("read_file", {"filePath": "/a.ts", "startLine": "1"}), "\n",
                         ParsedCall("read_file", {"filePath": "/b.ts", "startLine": "1"})]),
    "literal-values": ('<invoke name="create_file"><parameter name="content">if (a < b && c) { x = "</invoke>"; }</parameter>'
                       '<parameter name="filePath">\n/x.ts\n</parameter></invoke>',
                       [ParsedCall("create_file", {"content": 'if (a < b && c) { x = "</invoke>"; }', "filePath": "/x.ts"})]),
    "undeclared": ('<invoke name="rm_rf"><parameter name="p">/</parameter></invoke>',
                   ['<invoke name="rm_rf"><parameter name="p">/</parameter></invoke>']),
    "final-answer": ('<invoke name="final_answer"><parameter name="answer">All done.</parameter></invoke>', ["All done."]),
    "hermes": ('<tool_call>{"name": "read_file", "arguments": {"filePath": "/c"}}</tool_call>',
               [ParsedCall("read_file", {"filePath": "/c"})]),
    "hermes-string-args": ('<tool_call>{"name": "read_file", "arguments": "{\\"filePath\\": \\"/c\\"}"}</tool_call>',
                           [ParsedCall("read_file", {"filePath": "/c"})]),
    "hermes-undeclared": ('<tool_call>{"name": "x", "arguments": {}}</tool_call>',
                          ['<tool_call>{"name": "x", "arguments": {}}</tool_call>']),
    "bare-json": ('Sure: {"name": "read_file", "arguments": {"filePath": "/d", "n": {"deep": [1, "}"]}}}',
                  ["Sure: ", ParsedCall("read_file", {"filePath": "/d", "n": {"deep": [1, "}"]}})]),
    "fenced-json": ('```json\n{"name": "read_file", "arguments": {"filePath": "/e"}}\n```',
                    [ParsedCall("read_file", {"filePath": "/e"})]),
    "code-fence-not-a-call": ("```python\nprint({'name': 1})\n```", ["```python\nprint({'name': 1})\n```"]),
    "json-not-a-tool": ('{"name": "Bob", "age": 3}', ['{"name": "Bob", "age": 3}']),
    "unclosed-invoke-forgiven": ('<invoke name="read_file"><parameter name="filePath">/f</parameter>',
                                 [ParsedCall("read_file", {"filePath": "/f"})]),
    "truncated-parameter-is-text": ('<invoke name="read_file"><parameter name="filePath">/f',
                                    ['<invoke name="read_file"><parameter name="filePath">/f']),
    "partial-start-at-end": ("a <invo", ["a <invo"]),
    "lookalike-tags": ("<invoker> <tool_calls> ``` x", ["<invoker> <tool_calls> ``` x"]),
}


@pytest.mark.parametrize("text, expected", CASES.values(), ids=CASES.keys())
def test_every_single_cut_gives_the_same_result(text, expected):
    for cut in range(len(text) + 1):
        assert parse_in_pieces(text, [cut]) == expected, f"cut at {cut}"


@pytest.mark.parametrize("text, expected", CASES.values(), ids=CASES.keys())
def test_token_sized_pieces_give_the_same_result(text, expected):
    rng = random.Random(len(text))
    for _ in range(30):
        cuts = rng.sample(range(1, len(text)), min(len(text) - 1, rng.randint(1, 40))) if len(text) > 1 else []
        assert parse_in_pieces(text, cuts) == expected
    assert parse_in_pieces(text, list(range(1, len(text)))) == expected  # one character at a time


def test_text_before_a_call_is_released_before_the_call_completes():
    parser = ToolCallParser(TOOLS)
    assert parser.feed("I will read it. <inv") == ["I will read it. "]
    assert parser.feed('oke name="read_file">') == []
    assert parser.feed('<parameter name="filePath">/a</parameter></invoke>') == [ParsedCall("read_file", {"filePath": "/a"})]


@pytest.mark.parametrize("text, malformed", [
    ('<invoke name="get_weather"><parameter name="city">Par', True),  # its reply ended inside a value
    ('<invoke name="get_weather"><parameter name="city">Paris</parameter>', False),  # a missing </invoke>: forgiven
    ('<invoke name="unknown"><parameter name="city">Par', False),  # not a declared tool: only text
    ('<invoke name="final_answer"><parameter name="answer">ye', False),
    ("plain text", False),
])
def test_a_declared_tools_call_that_cannot_be_read_is_marked_and_left_as_text(text, malformed):
    parser = ToolCallParser({"get_weather"})
    items = parser.feed(text) + parser.finish()
    assert parser.malformed is malformed
    if malformed:
        assert merge_text(items) == [text]
