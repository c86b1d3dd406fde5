"""The Responses writer, driven directly: the event order of each item
kind, rising sequence numbers, the terminal events, and errors as Codex
reads them (context_length_exceeded, rate_limit_exceeded)."""
from __future__ import annotations

import pytest

from app.streaming import frames, sse
from dialects.responses_writer import CompactionWriter, ResponsesWriter, error_body
from protocol.events import DoneEvent, ErrorEvent, TextEvent, ThinkingEvent, ToolCallEvent, Usage

DONE = DoneEvent(reason="stop", usage=Usage(prompt_tokens=5, completion_tokens=3, cached_tokens=2))
CALL = ToolCallEvent(index=0, id="call_abc", name="exec_command", arguments='{"cmd": "ls"}')
PATCH = ToolCallEvent(index=0, id="call_p", name="apply_patch", arguments='{"input": "*** Begin Patch"}')


def _events(events, custom=frozenset()) -> list[dict]:
    writer = ResponsesWriter("resp_1", "echo", 7, {"tools": []}, custom)
    out = [frame.body for frame in frames(events, writer)]
    assert [e["sequence_number"] for e in out] == list(range(len(out)))
    return out


def test_reasoning_then_text_then_a_call():
    out = _events([ThinkingEvent(text="hm"), TextEvent(text="Listing."), CALL, DoneEvent(reason="tool_calls")])
    assert [e["type"] for e in out] == [
        "response.created", "response.in_progress",
        "response.output_item.added", "response.reasoning_summary_part.added", "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done", "response.reasoning_summary_part.done", "response.output_item.done",
        "response.output_item.added", "response.content_part.added", "response.output_text.delta",
        "response.output_text.done", "response.content_part.done", "response.output_item.done",
        "response.output_item.added", "response.function_call_arguments.delta",
        "response.function_call_arguments.done", "response.output_item.done", "response.completed"]
    final = out[-1]["response"]
    assert [item["type"] for item in final["output"]] == ["reasoning", "message", "function_call"]
    assert final["output"][2] == {"type": "function_call", "id": "fc_abc", "status": "completed",
                                  "call_id": "call_abc", "name": "exec_command", "arguments": '{"cmd": "ls"}'}
    assert [e["output_index"] for e in out if e["type"] == "response.output_item.done"] == [0, 1, 2]


def test_a_custom_tools_call_carries_its_text_input():
    out = _events([PATCH, DoneEvent(reason="tool_calls")], frozenset({"apply_patch"}))
    assert [e["type"] for e in out][2:5] == ["response.output_item.added", "response.custom_tool_call_input.delta",
                                            "response.custom_tool_call_input.done"]
    assert out[-1]["response"]["output"] == [{"type": "custom_tool_call", "id": "ctc_p", "status": "completed",
                                              "call_id": "call_p", "name": "apply_patch", "input": "*** Begin Patch"}]


def test_a_namespaced_tools_call_names_its_namespace():
    writer = ResponsesWriter("resp_1", "echo", 7, {"tools": []})
    writer.namespaces = {"time__now": "mcp__office"}  # (Codex's MCP servers come as namespaces)
    now = ToolCallEvent(index=0, id="call_n", name="time__now", arguments="{}")
    out = [frame.body for frame in frames([now, CALL, DoneEvent(reason="tool_calls")], writer)]
    added = [e["item"] for e in out if e["type"] == "response.output_item.added"]
    assert added[0]["namespace"] == "mcp__office" and "namespace" not in added[1]
    assert out[-1]["response"]["output"][0] == {"type": "function_call", "id": "fc_n", "status": "completed",
                                                "call_id": "call_n", "name": "time__now", "namespace": "mcp__office",
                                                "arguments": "{}"}


def test_usage_and_the_token_limit():
    assert _events([TextEvent(text="x"), DONE])[-1]["response"]["usage"] == {
        "input_tokens": 5, "input_tokens_details": {"cached_tokens": 2}, "output_tokens": 3,
        "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 8}
    cut = _events([TextEvent(text="x"), DoneEvent(reason="length")])[-1]
    assert cut["type"] == "response.incomplete"
    assert cut["response"]["incomplete_details"] == {"reason": "max_output_tokens"}


@pytest.mark.parametrize("error, code, message", [
    (ErrorEvent(message="too long", status=400, prompt_tokens=9000, context_tokens=8192), "context_length_exceeded",
     "too long"),
    (ErrorEvent(message="rate limit reached", status=429, retry_after=7), "rate_limit_exceeded",
     "rate limit reached. Please try again in 7s."),
    (ErrorEvent(message="worker died", status=502), "server_error", "worker died"),
], ids=["context", "rate", "server"])
def test_an_error_after_the_start_is_response_failed(error, code, message):
    out = _events([TextEvent(text="x"), error])
    assert [e["type"] for e in out][-2:] == ["response.output_item.done", "response.failed"]
    assert out[-1]["response"]["status"] == "failed"
    assert out[-1]["response"]["error"] == {"code": code, "message": message}
    assert error_body(error.error())["error"]["message"] == message


def test_frames_are_named_events_lf_only():
    writer = ResponsesWriter("resp_1", "echo", 7, {})
    assert b"".join(map(sse, writer.opening())).startswith(
        b'event: response.created\ndata: {"type":"response.created","sequence_number":0,"response":{"id":"resp_1",')


def test_reasoning_asked_sealed_carries_its_text_and_signature_sealed():
    writer = ResponsesWriter("resp_1", "claude", 7, {"tools": []})
    writer.seal_reasoning = lambda text: f"<sealed {text}>"
    out = [frame.body for frame in frames([ThinkingEvent(text="Two.", signature="sig"), TextEvent(text="2"), DONE],
                                          writer)]
    reasoning = out[-1]["response"]["output"][0]
    assert reasoning["encrypted_content"] == '<sealed {"text": "Two.", "signature": "sig"}>'
    assert reasoning["summary"] == [{"type": "summary_text", "text": "Two."}]
    unsealed = _events([ThinkingEvent(text="hm"), DONE])[-1]["response"]["output"][0]
    assert "encrypted_content" not in unsealed


def test_a_compaction_is_one_sealed_item_and_no_text():
    writer = CompactionWriter("resp_1", "echo", 7, {"tools": []}, lambda text: f"<sealed {text}>")
    out = [frame.body for frame in frames([ThinkingEvent(text="hm"), TextEvent(text="The user "),
                                           TextEvent(text="wants X."), DONE], writer)]
    assert [e["type"] for e in out] == ["response.created", "response.in_progress", "response.output_item.added",
                                        "response.output_item.done", "response.completed"]
    item = {"type": "compaction", "id": "cmp_1_1", "encrypted_content": "<sealed The user wants X.>"}
    assert out[2]["item"] == out[3]["item"] == item and out[-1]["response"]["output"] == [item]
    assert [e["sequence_number"] for e in out] == list(range(5))


def test_in_the_background_created_is_said_when_queued_and_in_progress_with_the_first_event():
    writer = ResponsesWriter("resp_1", "echo", 7, {"tools": [], "background": True})
    created = writer.queued()[0].body
    assert (created["type"], created["sequence_number"], created["response"]["status"]) == (
        "response.created", 0, "queued")
    out = [frame.body for frame in frames([TextEvent(text="hi"), DONE], writer)]
    assert out[0]["type"] == "response.in_progress" and out[0]["sequence_number"] == 1
    assert out[-1]["response"]["background"] is True and out[-1]["response"]["status"] == "completed"
