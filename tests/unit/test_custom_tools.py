"""Freeform (custom) tools: what Copilot CLI sends on Chat Completions for
Codex-family models, through the job, to each upstream kind and through the
emulation, and back to the client as a custom call."""
from __future__ import annotations

import json

import pytest

from app.streaming import sse
from dialects import anthropic, ollama, openai, openai_writer, responses_writer
from dialects.openai_schemas import ChatCompletionRequest
from dialects.tools import custom_input, custom_tool_spec
from dialects.writer import Transcript
from protocol.contract import Job, Message, ToolCall, ToolChoice
from protocol.events import DoneEvent, ToolCallEvent
from workers.backends.tool_deltas import ToolCallAssembler
from workers.toolcalls.parser import ParsedCall, ToolCallParser
from workers.toolcalls.prompt import tool_instructions

LARK = 'start: "*** Begin Patch" LF hunk+ "*** End Patch"\n%import common.LF'
GRAMMAR_TOOL = {"type": "custom", "custom": {"name": "apply_patch", "description": "Edit files.", "format": {
    "type": "grammar", "grammar": {"syntax": "lark", "definition": LARK}}}}
PATCH = "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch\n"
CALL = ToolCallEvent(index=0, id="call_1", name="apply_patch", arguments=json.dumps({"input": PATCH}))
DONE = DoneEvent(reason="tool_calls")


def _chat(**fields) -> Job:
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}]} | fields
    return openai.chat_to_job(ChatCompletionRequest.model_validate(body), "j", "m")


@pytest.mark.parametrize("tool, form", [
    (GRAMMAR_TOOL, {"type": "grammar", "syntax": "lark", "definition": LARK}),
    ({"type": "custom", "custom": {"name": "apply_patch", "format": {"type": "text"}}}, {"type": "text"}),
    ({"type": "custom", "custom": {"name": "apply_patch"}}, None),
    ({"type": "custom", "custom": {"name": "apply_patch", "format": {"type": "a-kind-added-later"}}}, {"type": "text"}),
], ids=["grammar", "text", "no-format", "unknown-format"])
def test_chat_custom_tool_becomes_a_custom_spec(tool, form):
    spec = _chat(tools=[tool]).tools[0]
    assert (spec.name, spec.kind, spec.format) == ("apply_patch", "custom", form)
    assert spec.parameters["required"] == ["input"] and spec.parameters["properties"]["input"]["type"] == "string"
    assert (LARK in spec.parameters["properties"]["input"]["description"]) == (form is not None and "definition" in form)


def test_copilot_clis_request_is_accepted_whole(copilot_cli_fixture):
    job = openai.chat_to_job(ChatCompletionRequest.model_validate(copilot_cli_fixture["body"]), "j", "echo")
    kinds = {t.name: t.kind for t in job.tools}
    assert kinds["apply_patch"] == "custom" and kinds["bash"] == "function"
    assert job.tools[[t.name for t in job.tools].index("apply_patch")].format["syntax"] == "lark"


def test_custom_call_in_history_and_custom_tool_choice():
    job = _chat(tools=[GRAMMAR_TOOL], tool_choice={"type": "custom", "custom": {"name": "apply_patch"}}, messages=[
        {"role": "user", "content": "edit"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "custom", "custom": {"name": "apply_patch", "input": PATCH}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "Done"}])
    assert job.messages[1].tool_calls == [ToolCall(id="call_1", name="apply_patch", arguments=CALL.arguments)]
    assert (job.messages[2].role, job.messages[2].tool_call_id) == ("tool", "call_1")
    assert (job.tool_choice.mode, job.tool_choice.name) == ("function", "apply_patch")


def test_streamed_custom_call_bytes():
    writer = openai_writer.ChatWriter("c", "m", 1, custom_tools=frozenset({"apply_patch"}))
    head, body = writer.tool_call(CALL)
    assert sse(head).endswith(b'"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"custom","custom":'
                              b'{"name":"apply_patch","input":""}}]},"logprobs":null,"finish_reason":null}]}\n\n')
    assert body["choices"][0]["delta"] == {"tool_calls": [{"index": 0, "custom": {"input": PATCH}}]}
    assert writer.finish(DONE)[0]["choices"][0]["finish_reason"] == "tool_calls"


def test_whole_reply_has_the_custom_call_and_a_plain_answer_no_tool_calls_key():
    writer = openai_writer.ChatWriter("c", "m", 1, custom_tools=frozenset({"apply_patch"}))
    message = writer.reply(Transcript([], [CALL], DONE))["choices"][0]["message"]
    assert message["tool_calls"] == [{"id": "call_1", "type": "custom", "custom": {"name": "apply_patch",
                                                                                    "input": PATCH}}]
    plain = writer.reply(Transcript(["hi"], [], DoneEvent(reason="stop")))["choices"][0]["message"]
    assert "tool_calls" not in plain  # Copilot CLI crashes on tool_calls: null


def test_a_function_call_stays_one_beside_custom_tools():
    writer = openai_writer.ChatWriter("c", "m", 1, custom_tools=frozenset({"apply_patch"}))
    call = CALL.model_copy(update={"name": "bash", "arguments": '{"command": "ls"}'})
    assert writer.tool_call(call)[1]["choices"][0]["delta"]["tool_calls"][0] == {
        "index": 0, "function": {"arguments": '{"command": "ls"}'}}


JOB = Job(id="j", model="m", tools=[custom_tool_spec("apply_patch", "Edit files.", {
    "type": "grammar", "syntax": "lark", "definition": LARK})], tool_choice=ToolChoice(mode="function",
                                                                                       name="apply_patch"),
    messages=[Message(role="user", content="edit"),
              Message(role="assistant", tool_calls=[ToolCall(id="call_1", name="apply_patch",
                                                             arguments=CALL.arguments)]),
              Message(role="tool", tool_call_id="call_1", content="Done")])


def test_an_openai_upstream_that_takes_custom_tools_gets_them_as_such():
    _, body = openai.upstream_request(JOB, "gpt-5.1-codex", custom_tools=True)
    assert body["tools"] == [{"type": "custom", "custom": {"name": "apply_patch", "description": "Edit files.",
                                                           "format": {"type": "grammar", "grammar": {
                                                               "syntax": "lark", "definition": LARK}}}}]
    assert body["messages"][1]["tool_calls"] == [
        {"id": "call_1", "type": "custom", "custom": {"name": "apply_patch", "input": PATCH}}]
    assert body["tool_choice"] == {"type": "custom", "custom": {"name": "apply_patch"}}


@pytest.mark.parametrize("kind", ["openai", "ollama", "anthropic"])
def test_other_upstreams_get_a_function_of_one_input(kind):
    if kind == "anthropic":
        body = anthropic.upstream_request(JOB, "u")[1]
        tool, call = body["tools"][0], body["messages"][1]["content"][0]
        assert tool["input_schema"]["properties"]["input"]["type"] == "string"
        assert call["input"] == {"input": PATCH}
        return
    body = (openai.upstream_request(JOB, "u") if kind == "openai" else ollama.upstream_request(JOB, "u"))[1]
    function = body["tools"][0]
    assert function["type"] == "function" and LARK in function["function"]["parameters"]["properties"]["input"][
        "description"]  # the grammar described, where it cannot be passed on
    arguments = body["messages"][1]["tool_calls"][0]["function"]["arguments"]
    assert json.loads(arguments) if isinstance(arguments, str) else arguments == {"input": PATCH}


def test_an_upstreams_streamed_custom_call_is_reassembled():
    calls = ToolCallAssembler()
    calls.add([{"index": 0, "id": "call_1", "type": "custom", "custom": {"name": "apply_patch", "input": ""}}])
    for piece in (PATCH[:10], PATCH[10:]):
        calls.add([{"index": 0, "custom": {"input": piece}}])
    (call,) = calls.calls()
    assert (call.name, json.loads(call.arguments)) == ("apply_patch", {"input": PATCH})


def test_emulation_offers_the_grammar_and_parses_the_call():
    prompt = tool_instructions(JOB.tools, ToolChoice())
    assert "## apply_patch\nEdit files.\nParameters: one, \"input\"" in prompt
    assert f"The input must follow this lark grammar:\n{LARK}" in prompt  # readable, not escaped in a schema
    parser = ToolCallParser({"apply_patch"})
    text = f'<invoke name="apply_patch">\n<parameter name="input">{PATCH}</parameter>\n</invoke>'
    items = [item for cut in (text[:17], text[17:60], text[60:]) for item in parser.feed(cut)] + parser.finish()
    assert items == [ParsedCall("apply_patch", {"input": PATCH})]


@pytest.mark.parametrize("arguments, text", [
    (json.dumps({"input": PATCH}), PATCH),
    (json.dumps({"patch": PATCH}), PATCH),  # a model that named the one parameter otherwise
    (PATCH, PATCH),  # a model that wrote no JSON
    ("{}", ""),
    (json.dumps({"input": 3}), '{"input": 3}'),
], ids=["input", "other-name", "not-json", "empty", "not-a-string"])
def test_custom_input_from_what_a_model_wrote(arguments, text):
    assert custom_input(arguments) == text


def test_responses_custom_call_item_uses_the_same_reading():
    assert responses_writer.call_item(CALL, custom=True)["input"] == PATCH
