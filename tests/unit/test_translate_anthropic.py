"""Anthropic Messages requests -> the internal Job: what Claude Code really
sends (the shared fixture), each block kind, tools, thinking and limits."""
from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from dialects import anthropic as translate
from dialects.anthropic_schemas import MessagesRequest
from protocol.contract import Job, Message, PromptSpec, SamplingOptions, ToolCall, ToolSpec
from protocol.errors import InvalidRequest

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "claude-code-messages-request.json"
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 16).decode()
CHAT = ["completion", "tools"]


def _request(**fields) -> MessagesRequest:
    return MessagesRequest.model_validate({"model": "m", "max_tokens": 100} | fields)


def _job(capabilities=CHAT, context=8192, **fields):
    return translate.messages_to_job(_request(**fields), "j", "m", capabilities, context)


def test_claude_codes_first_request():
    body = json.loads(FIXTURE.read_text())["body"]
    job = translate.messages_to_job(MessagesRequest.model_validate(body), "j", "echo", CHAT, 131072)
    roles = [m.role for m in job.messages]
    # its user turn of two text blocks is one message; its trailing system message stays where it is
    assert roles == ["system", "user", "system"]
    assert not job.messages[0].content.startswith(translate.BILLING_PREFIX)  # the billing line is gone
    assert job.messages[0].content.startswith("You are a Claude agent")
    # the prompt, after the <system-reminder> block, on a line of its own
    assert job.messages[1].content.startswith("<system-reminder>") and job.messages[1].content.endswith("\nsay hi")
    assert len(job.tools) == 24 and job.tools[0].name == "Agent" and job.tools[0].parameters["type"] == "object"
    assert job.options.max_tokens == 32000 and job.think is None  # adaptive thinking, a model that does not think


def test_billing_line_is_dropped_so_the_prompt_stays_the_same():
    def system(cch):
        return [{"type": "text", "text": f"x-anthropic-billing-header: cc_version=2.1; cch={cch};"},
                {"type": "text", "text": "You are helpful.", "cache_control": {"type": "ephemeral"}}]
    first, second = (_job(system=system(c), messages=[{"role": "user", "content": "hi"}]) for c in ("a1", "b2"))
    assert first.messages == second.messages
    assert first.messages[0] == Message(role="system", content="You are helpful.")


def test_a_tool_round_trip():
    job = _job(messages=[
        {"role": "user", "content": "write it"},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Writing."},
            {"type": "tool_use", "id": "toolu_1", "name": "Write", "input": {"file_path": "/a", "content": "x"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "done"}]},
            {"type": "text", "text": "thanks"}]}])
    assert job.messages == [
        Message(role="user", content="write it"),
        Message(role="assistant", content="Writing.",
                tool_calls=[ToolCall(id="toolu_1", name="Write", arguments='{"file_path": "/a", "content": "x"}')]),
        Message(role="tool", content="done", tool_call_id="toolu_1"),
        Message(role="user", content="thanks")]


def test_a_failed_tool_result_reaches_the_model_as_failed():
    job = _job(messages=[{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "no such file", "is_error": True}]}])
    assert job.messages == [Message(role="tool", content="no such file", tool_call_id="toolu_1", failed=True)]


@pytest.mark.parametrize("choice, mode, name, parallel", [
    ({"type": "auto"}, "auto", None, True),
    ({"type": "any"}, "required", None, True),
    ({"type": "none"}, "none", None, True),
    ({"type": "tool", "name": "Write"}, "function", "Write", True),
    ({"type": "auto", "disable_parallel_tool_use": True}, "auto", None, False),
], ids=["auto", "any", "none", "tool", "one-at-a-time"])
def test_tool_choice(choice, mode, name, parallel):
    job = _job(messages=[{"role": "user", "content": "x"}], tool_choice=choice,
               tools=[{"name": "Write", "input_schema": {"type": "object"}}])
    assert (job.tool_choice.mode, job.tool_choice.name, job.parallel_tool_calls) == (mode, name, parallel)


def test_a_named_tool_that_is_not_offered_is_refused():
    with pytest.raises(InvalidRequest, match="tool_choice.name: 'Nope' is not among the tools"):
        _job(messages=[{"role": "user", "content": "x"}], tool_choice={"type": "tool", "name": "Nope"})


def test_anthropics_server_tools_are_left_out_and_named():
    request = _request(messages=[{"role": "user", "content": "x"}], tools=[
        {"name": "Read", "input_schema": {"type": "object"}},
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 5}])
    assert [t.name for t in translate.to_tool_specs(request)] == ["Read"]
    assert translate.server_only_tools(request) == ["web_search (web_search_20250305)"]


@pytest.mark.parametrize("thinking, effort, think", [
    (None, None, None),
    ({"type": "disabled"}, None, False),
    ({"type": "enabled"}, None, True),
    ({"type": "enabled", "budget_tokens": 2048}, None, "low"),
    ({"type": "enabled", "budget_tokens": 10000}, None, "medium"),
    ({"type": "enabled", "budget_tokens": 32000}, "low", "low"),
    ({"type": "adaptive"}, "max", "high"),
    ({"type": "adaptive"}, None, None),
], ids=["unset", "disabled", "enabled", "enabled-2k", "enabled-10k", "enabled-effort", "adaptive-effort",
        "adaptive"])
def test_thinking_for_a_model_that_thinks(thinking, effort, think):
    fields = {"thinking": thinking} if thinking else {}
    if effort:
        fields["output_config"] = {"effort": effort}
    assert _job(CHAT + ["thinking"], messages=[{"role": "user", "content": "x"}], **fields).think == think


def test_thinking_blocks_go_back_only_to_a_model_that_thinks():
    turn = [{"role": "user", "content": "x"}, {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "hmm", "signature": "sig"}, {"type": "redacted_thinking", "data": "EnC"},
        {"type": "text", "text": "y"}]}]
    kept = _job(CHAT + ["thinking"], messages=turn).messages[1]
    assert (kept.thinking, kept.thinking_signature, kept.redacted_thinking) == ("hmm", "sig", ["EnC"])
    dropped = _job(CHAT, messages=turn, thinking={"type": "enabled", "budget_tokens": 1024}).messages[1]
    assert (dropped.thinking, dropped.redacted_thinking) == ("", [])


def test_sampling_and_max_tokens_clamped_to_the_context():
    job = _job(context=4096, max_tokens=32000, temperature=0.5, top_p=0.9, top_k=40, stop_sequences=["END"],
               messages=[{"role": "user", "content": "x"}])
    options = job.options
    assert (options.max_tokens, options.temperature, options.top_p, options.top_k, options.stop) == (
        4096, 0.5, 0.9, 40, ["END"])


def test_images_need_vision_and_base64():
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}
    message = [{"role": "user", "content": [image, {"type": "text", "text": "what is it?"}]}]
    job = _job(CHAT + ["vision"], messages=message)
    assert job.messages[0].images[0].mime == "image/png" and job.version == 2
    with pytest.raises(InvalidRequest, match="does not support images"):
        _job(messages=message)
    url = {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}
    with pytest.raises(InvalidRequest, match="only base64 image sources"):
        _job(CHAT + ["vision"], messages=[{"role": "user", "content": [url]}])


def test_unknown_blocks_and_fields_are_passed_over():
    job = _job(messages=[{"role": "user", "content": [{"type": "text", "text": "x"}]}, {"role": "assistant", "content": [
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}},
        {"type": "text", "text": "y"}]}], context_management={"edits": []}, service_tier="auto")
    assert [(m.role, m.content) for m in job.messages] == [("user", "x"), ("assistant", "y")]


# --- upstream side: Job -> an Anthropic-compatible server's request -------------------
def _upstream(**fields):
    job = Job(id="j", model="m", options=SamplingOptions(max_tokens=4000), **fields)
    return translate.upstream_request(job, "claude-x")


def test_upstream_request_turns_system_tools_and_results():
    path, body = _upstream(messages=[
        Message(role="system", content="Be brief."), Message(role="user", content="read a"),
        Message(role="assistant", content="", thinking="hmm", thinking_signature="sig", redacted_thinking=["EnC"],
                tool_calls=[ToolCall(id="toolu_1", name="read", arguments='{"p": "a"}')]),
        Message(role="tool", content="A", tool_call_id="toolu_1"),
        Message(role="tool", content="no", tool_name="read", failed=True),
        Message(role="user", content="thanks"), Message(role="system", content="reminder")],
        tools=[ToolSpec(name="read", parameters={"type": "object"})], parallel_tool_calls=False)
    assert path == "/v1/messages"
    assert body == {
        "model": "claude-x", "max_tokens": 4000, "stream": True, "system": "Be brief.",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "read a"}]},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm", "signature": "sig"},
                                              {"type": "redacted_thinking", "data": "EnC"},
                                              {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"p": "a"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "A"}],
                 "is_error": False},
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "no"}],
                 "is_error": True},  # Ollama's clients name the tool: its latest call
                {"type": "text", "text": "thanks"}]},
            {"role": "system", "content": [{"type": "text", "text": "reminder"}]}],
        "tools": [{"name": "read", "description": "", "input_schema": {"type": "object"}}],
        "tool_choice": {"type": "auto", "disable_parallel_tool_use": True}}


@pytest.mark.parametrize("think, thinking, sampling", [
    (None, None, {"temperature": 1.0, "top_k": 5}),
    ("low", {"type": "enabled", "budget_tokens": 2048}, {}),
    (True, {"type": "enabled", "budget_tokens": 3999}, {}),  # under max_tokens
], ids=["off", "low", "on"])
def test_upstream_thinking_budgets_and_sampling(think, thinking, sampling):
    job = Job(id="j", model="m", messages=[Message(role="user", content="x")], think=think,
              options=SamplingOptions(max_tokens=4000, temperature=1.7, top_k=5))
    _, body = translate.upstream_request(job, "claude-x")
    assert body.get("thinking") == thinking
    assert {k: body[k] for k in ("temperature", "top_k") if k in body} == sampling


def test_a_raw_prompt_has_no_messages_form():
    with pytest.raises(InvalidRequest, match="takes chat requests, not raw prompts"):
        _upstream(prompt=PromptSpec(prompt="def f(", raw=True))
