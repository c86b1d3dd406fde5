"""Prompt side of tool emulation: rendering, matching, limits, injection."""
from __future__ import annotations

from protocol.contract import Job, Message, ToolCall, ToolChoice, ToolSpec
from workers.toolcalls.emulation import plan_tools
from workers.toolcalls.prompt import render_conversation, tool_instructions, tool_rounds
from workers.toolcalls.system_inject import inject_system

READ = ToolSpec(name="read_file", description="Read a file.", parameters={"type": "object"})
GREP = ToolSpec(name="grep", description="Search.")


def call(id_, name="read_file", arguments='{"filePath": "/a"}'):
    return ToolCall(id=id_, name=name, arguments=arguments)


def test_results_are_matched_by_id_not_by_order():
    messages = [
        Message(role="user", content="go"),
        Message(role="assistant", content="Reading both.", tool_calls=[call("c1"), call("c2", "grep", '{"q": 1}')]),
        Message(role="tool", tool_call_id="c2", content="grep output"),
        Message(role="tool", tool_call_id="c1", content="Error: no such file"),
    ]
    rendered = render_conversation(messages)
    assert [m.role for m in rendered] == ["user", "assistant", "user"]
    assert rendered[1].content == ('Reading both.\n<invoke name="read_file">\n<parameter name="filePath">/a</parameter>\n'
                                   '</invoke>\n<invoke name="grep">\n<parameter name="q">1</parameter>\n</invoke>')
    results = rendered[2].content
    assert results.startswith("<tool_results>\n") and results.endswith("\n</tool_results>")
    assert '<result tool="grep" arguments="{\\"q\\": 1}" status="SUCCESS">\ngrep output\n</result>' in results
    assert '<result tool="read_file" arguments="{\\"filePath\\": \\"/a\\"}" status="ERROR">\nError: no such file' in results


def test_missing_and_orphan_results_are_reported():
    messages = [
        Message(role="assistant", tool_calls=[call("c1")]),
        Message(role="tool", tool_call_id="zzz", tool_name="grep", content="stray"),
    ]
    results = render_conversation(messages)[1].content
    assert 'status="ERROR">\nno result was returned for this call' in results
    assert "(a result for a call that was not made in the previous reply)\nstray" in results


def test_a_failed_flag_marks_an_error_and_ollama_results_match_by_name():
    messages = [Message(role="assistant", tool_calls=[call("x1", "grep"), call("x2")]),
                Message(role="tool", tool_name="read_file", content="fine", failed=True)]
    results = render_conversation(messages)[1].content
    assert '<result tool="read_file" arguments="{\\"filePath\\": \\"/a\\"}" status="ERROR">\nfine' in results
    assert '<result tool="grep"' in results and "no result was returned" in results


def test_tool_rounds_count_since_the_last_user_message():
    round_ = [Message(role="assistant", tool_calls=[call("a")]), Message(role="tool", tool_call_id="a")]
    assert tool_rounds([Message(role="user", content="1")] + round_ * 3) == 3
    assert tool_rounds(round_ * 3 + [Message(role="user", content="2")] + round_) == 1


def test_instructions_follow_tool_choice():
    assert "You must call at least one tool" in tool_instructions([READ], ToolChoice(mode="required"))
    named = tool_instructions([READ], ToolChoice(mode="function", name="read_file"))
    assert "You must call the tool read_file" in named and '## read_file\nRead a file.\nParameters (JSON schema): {"type":"object"}' in named


def job(messages, tools=(READ, GREP), choice=ToolChoice()):
    return Job(id="j", model="m", messages=messages, tools=list(tools), tool_choice=choice)


def test_plan_offers_tools_in_the_system_prompt():
    plan = plan_tools(job([Message(role="system", content="Be nice."), Message(role="user", content="hi")]),
                      "emulated", "native", 25)
    assert [t.name for t in plan.tools] == ["read_file", "grep"]
    assert plan.messages[0].content.startswith("Be nice.\n\n# Tools") and len(plan.messages) == 2


def test_plan_for_a_named_function_offers_only_it_and_none_offers_nothing():
    named = plan_tools(job([Message(role="user", content="x")], choice=ToolChoice(mode="function", name="grep")),
                       "emulated", "native", 25)
    assert [t.name for t in named.tools] == ["grep"]
    none = plan_tools(job([Message(role="user", content="x")], choice=ToolChoice(mode="none")), "emulated", "native", 25)
    assert none.tools == [] and none.messages == [Message(role="user", content="x")]
    off = plan_tools(job([Message(role="user", content="x")]), "off", "native", 25)
    assert off.tools == []


def test_plan_at_the_step_limit_asks_for_a_final_answer():
    round_ = [Message(role="assistant", tool_calls=[call("a")]), Message(role="tool", tool_call_id="a", content="r")]
    plan = plan_tools(job([Message(role="user", content="go")] + round_ * 2), "emulated", "native", 2)
    assert plan.tools == [] and plan.step_limited
    assert plan.messages[0].role == "system" and "give your final answer now" in plan.messages[0].content


def test_injection_on_a_new_conversation():
    messages = [Message(role="system", content="S1"), Message(role="user", content="question"),
                Message(role="system", content="S2")]
    injected = inject_system(messages, "TOOLS")
    assert [m.role for m in injected] == ["user"]
    assert injected[0].content == ("<system_context>\n=== Agent Instructions ===\nTOOLS\n\n=== System Context 1 ===\n"
                                   "S1\n\n=== System Context 2 ===\nS2\n</system_context>\n\nquestion")


def test_injection_uses_another_tag_if_the_user_text_has_one_and_skips_later_turns():
    inner = inject_system([Message(role="system", content="S"), Message(role="user", content="<system_context>x")])
    assert inner[0].content.startswith("<agent_system_context>\n=== System Context 1 ===\nS\n</agent_system_context>")
    later = [Message(role="system", content="S"), Message(role="user", content="a"),
             Message(role="assistant", content="b"), Message(role="user", content="c")]
    assert inject_system(later, "TOOLS") == later


def test_plan_with_injection():
    plan = plan_tools(job([Message(role="system", content="S"), Message(role="user", content="hi")]),
                      "emulated", "inject", 25)
    assert [m.role for m in plan.messages] == ["user"]
    assert plan.messages[0].content.startswith("<system_context>\n=== Agent Instructions ===\n# Tools")
