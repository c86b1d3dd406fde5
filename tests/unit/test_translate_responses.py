"""Responses requests -> the internal Job: Codex's own first request (the
shared fixture), items in order, tools of every kind, choices and limits."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from dialects import responses as translate
from dialects.responses_schemas import ResponsesRequest
from protocol.contract import Message, ToolCall
from protocol.errors import InvalidRequest

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "codex-responses-request.json"
CHAT = ["completion", "tools"]


def _request(**fields) -> ResponsesRequest:
    return ResponsesRequest.model_validate({"model": "m"} | fields)


def _job(capabilities=CHAT, **fields):
    return translate.responses_to_job(_request(**fields), "j", "m", capabilities)


def test_codexs_first_request():
    request = ResponsesRequest.model_validate(json.loads(FIXTURE.read_text())["body"])
    job = translate.responses_to_job(request, "j", "echo", CHAT)
    # developer: system; its item of two parts is one message, as each item is
    assert [m.role for m in job.messages] == ["system", "system", "user", "user"]
    assert job.messages[-1].content == "say hi"
    names = [t.name for t in job.tools]
    assert names[:2] == ["exec_command", "write_stdin"] and "close_agent" in names  # the namespace unfolded
    assert translate.server_only_tools(request) == ["web_search"]
    assert job.think is None and job.parallel_tool_calls is True
    assert job.cache_key == "01a21544-bf12-7261-a3b8-7d71bb8cfd4f"  # Codex's conversation: one cache


def test_items_in_order_with_a_parallel_round():
    job = _job(instructions="Be brief.", input=[
        {"role": "user", "content": "go"},
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "plan"}]},
        {"type": "function_call", "call_id": "c1", "name": "a", "arguments": '{"x": 1}'},
        {"type": "function_call", "call_id": "c2", "name": "b", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "A"},
        {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "B"}]},
        {"type": "custom_tool_call", "call_id": "c3", "name": "apply_patch", "input": "*** Begin"},
        {"type": "custom_tool_call_output", "call_id": "c3", "output": "done"},
        {"type": "local_shell_call", "call_id": "c4", "status": "completed",
         "action": {"type": "exec", "command": ["ls"]}},
        {"type": "local_shell_call_output", "call_id": "c4", "output": "a.txt"},
        {"type": "web_search_call", "id": "ws_1", "status": "completed"}])
    assert job.messages == [
        Message(role="system", content="Be brief."), Message(role="user", content="go"),
        Message(role="assistant", tool_calls=[ToolCall(id="c1", name="a", arguments='{"x": 1}'),
                                              ToolCall(id="c2", name="b", arguments="{}")]),
        Message(role="tool", content="A", tool_call_id="c1"), Message(role="tool", content="B", tool_call_id="c2"),
        Message(role="assistant", tool_calls=[ToolCall(id="c3", name="apply_patch",
                                                       arguments='{"input": "*** Begin"}')]),
        Message(role="tool", content="done", tool_call_id="c3"),
        Message(role="assistant", tool_calls=[ToolCall(id="c4", name="local_shell",
                                                       arguments='{"type": "exec", "command": ["ls"]}')]),
        Message(role="tool", content="a.txt", tool_call_id="c4")]


def test_reasoning_goes_back_only_to_a_model_that_thinks():
    items = [{"role": "user", "content": "x"}, {"type": "reasoning", "summary": [{"text": "plan"}]},
             {"role": "assistant", "content": [{"type": "output_text", "text": "y"}]}]
    assert _job(CHAT + ["thinking"], input=items).messages[-1].thinking == "plan"
    assert _job(input=items).messages[-1].thinking == ""


def test_tools_choices_and_limits():
    job = _job(input="x", tools=[{"type": "custom", "name": "apply_patch"}, {"type": "file_search"}],
               tool_choice={"type": "custom", "name": "apply_patch"}, max_output_tokens=50, temperature=0.5,
               text={"format": {"type": "json_schema", "name": "o", "schema": {"type": "object"}}})
    assert [t.name for t in job.tools] == ["apply_patch"]
    assert job.tools[0].kind == "custom" and job.tools[0].parameters["required"] == ["input"]
    assert (job.tool_choice.mode, job.tool_choice.name) == ("function", "apply_patch")
    assert (job.options.max_tokens, job.options.temperature, job.format) == (50, 0.5, {"type": "object"})
    with pytest.raises(InvalidRequest, match="tool_choice.name: 'nope' is not among the tools"):
        _job(input="x", tool_choice={"type": "function", "name": "nope"})


@pytest.mark.parametrize("effort, think", [("none", False), ("minimal", "low"), ("high", "high"), ("xhigh", "high")])
def test_reasoning_effort_for_a_model_that_thinks(effort, think):
    assert _job(CHAT + ["thinking"], input="x", reasoning={"effort": effort}).think == think
    assert _job(input="x", reasoning={"effort": effort}).think is None


def test_images_need_vision_and_a_data_url():
    image = {"role": "user", "content": [{"type": "input_text", "text": "what?"},
                                         {"type": "input_image", "image_url": "https://example.com/a.png"}]}
    with pytest.raises(InvalidRequest, match="does not support images"):
        _job(input=[image])
    with pytest.raises(InvalidRequest, match="remote image URLs are not fetched"):
        _job(CHAT + ["vision"], input=[image])


def test_a_compaction_asks_the_model_for_a_summary_without_tools():
    request = _request(input=[{"role": "user", "content": "fix the bug"}, {"type": "compaction_trigger"}],
                       tools=[{"type": "function", "name": "f", "parameters": {}}], tool_choice="required")
    assert translate.is_compaction(request) and not translate.is_compaction(_request(input="x"))
    job = translate.responses_to_job(translate.compaction_request(request), "j", "m", CHAT)
    assert [(m.role, m.content) for m in job.messages] == [("user", "fix the bug"),
                                                             ("user", translate.COMPACTION_PROMPT)]
    assert job.tools == [] and job.tool_choice.mode == "none"


def test_sealed_items_open_into_a_summary_and_signed_thinking():
    seals = {"c": "the summary", "r": '{"text": "let me see", "signature": "sig"}'}
    request = _request(input=[{"type": "compaction", "encrypted_content": "c"},
                              {"type": "reasoning", "summary": [], "encrypted_content": "r"},
                              {"role": "assistant", "content": "two"}, {"role": "user", "content": "and?"}])
    opened = translate.opened(request, lambda kind, blob, field: seals[blob])
    job = translate.responses_to_job(opened, "j", "m", CHAT + ["thinking"])
    assert job.messages[0] == Message(role="user", content=translate.SUMMARY_PREFIX + "the summary")
    assert (job.messages[1].thinking, job.messages[1].thinking_signature) == ("let me see", "sig")


def test_a_v1_compaction_keeps_the_newest_user_messages_as_output_items():
    big = "x" * (translate.KEPT_USER_CHARACTERS - 10)
    request = _request(input=[{"role": "user", "content": "too old"}, {"role": "user", "content": big},
                              {"role": "assistant", "content": "ok"}, {"role": "user", "content": "newest"}])
    assert translate.kept_user_messages(request) == [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
        for text in (big, "newest")]
