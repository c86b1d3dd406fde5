"""The Gemini API dialect: requests -> Job (Gemini CLI's own included),
Job -> an upstream's request, and the writer's bytes in both framings."""
from __future__ import annotations

import json

import pytest

from app.streaming import JsonArray, sse, stream, stream_array
from dialects import gemini
from dialects.gemini_schemas import CountableRequest, GenerateContentRequest
from dialects.gemini_writer import GenerateContentWriter, error_body, model_page
from dialects.writer import Transcript
from protocol.errors import InvalidRequest, SwitchboardError
from protocol.events import (
    DoneEvent, ErrorEvent, KeepAliveEvent, ServerToolEvent, TextEvent, ThinkingEvent, ToolCallEvent, Usage,
)

CHAT = ["completion", "tools"]
DONE = DoneEvent(reason="stop", usage=Usage(prompt_tokens=7, completion_tokens=3, cached_tokens=4))


def _job(body: dict, capabilities=CHAT, context: int = 8192):
    return gemini.generate_to_job(GenerateContentRequest.model_validate(body), "j1", "echo", capabilities, context)


def _user(text: str) -> dict:
    return {"role": "user", "parts": [{"text": text}]}


# --- requests -> job -------------------------------------------------------------------
def test_gemini_clis_first_turn(gemini_cli_fixture):
    body = gemini_cli_fixture["first_turn"]["body"]
    job = _job(body)
    system, user = job.messages
    assert system.role == "system" and system.content == body["systemInstruction"]["parts"][0]["text"]
    # its session context and the prompt are two parts of one turn: one message
    assert user.role == "user" and user.content.startswith("<session_context>")
    assert user.content.endswith("\nplain answer please")
    names = [tool.name for tool in job.tools]
    assert len(names) == 15 and "write_file" in names and job.tool_choice.mode == "auto"
    read_file = next(tool for tool in job.tools if tool.name == "read_file")
    assert read_file.parameters["required"] == ["file_path"]
    assert (job.options.temperature, job.options.top_p, job.options.top_k) == (1, 0.95, 64)
    assert job.think is None  # includeThoughts alone, for a model that does not think


def test_gemini_clis_follow_up_pairs_its_call_and_response_by_id(gemini_cli_fixture):
    job = _job(gemini_cli_fixture["follow_up_turn"]["body"])
    assert [m.role for m in job.messages] == ["system", "user", "assistant", "tool"]
    call = job.messages[2].tool_calls[0]
    assert (call.id, call.name) == ("write_file_1795933455942_0", "write_file")
    assert json.loads(call.arguments)["content"] == "written by the agent"
    result = job.messages[3]
    assert result.tool_call_id == call.id and result.content.startswith("Successfully created")
    assert gemini.sends_call_ids(GenerateContentRequest.model_validate(gemini_cli_fixture["follow_up_turn"]["body"]))


def test_calls_without_ids_get_stable_ids_and_responses_pair_by_name_oldest_first():
    body = {"contents": [_user("q"), {"role": "model", "parts": [
        {"functionCall": {"name": "ls", "args": {"path": "a"}}}, {"functionCall": {"name": "ls", "args": {"path": "b"}}},
        {"functionCall": {"name": "cat", "args": {}}}]}, {"role": "user", "parts": [
            {"functionResponse": {"name": "ls", "response": {"output": "A"}}},
            {"functionResponse": {"name": "cat", "response": {"lines": 2}}},
            {"functionResponse": {"name": "ls", "response": {"output": "B"}}}]}]}
    job, again = _job(body), _job(body)
    calls = job.messages[1].tool_calls
    assert [c.id for c in calls] == ["call_1_0", "call_1_1", "call_1_2"] == [c.id for c in again.messages[1].tool_calls]
    results = [(m.tool_call_id, m.content) for m in job.messages[2:]]
    assert results == [("call_1_0", "A"), ("call_1_2", '{"lines": 2}'), ("call_1_1", "B")]


def test_snake_case_names_are_read_too_and_unknown_fields_ignored():
    job = _job({"contents": [_user("q")], "system_instruction": {"parts": [{"text": "be brief"}]},
                "generation_config": {"max_output_tokens": 9}, "safetySettings": [{"category": "X"}]})
    assert job.messages[0].content == "be brief" and job.options.max_tokens == 9


def test_googles_schema_subset_becomes_json_schema():
    schema = {"type": "OBJECT", "properties": {"when": {"type": "STRING", "format": "date-time", "nullable": True},
                                               "tags": {"type": "ARRAY", "items": {"type": "STRING"}}},
              "required": ["when"], "propertyOrdering": ["when", "tags"]}
    assert gemini.json_schema(schema) == {"type": "object", "properties": {
        "when": {"type": ["string", "null"], "format": "date-time"},
        "tags": {"type": "array", "items": {"type": "string"}}}, "required": ["when"]}
    job = _job({"contents": [_user("q")], "tools": [{"functionDeclarations": [
        {"name": "plan", "description": "d", "parameters": schema}]}]})
    assert job.tools[0].parameters["properties"]["tags"]["type"] == "array"


@pytest.mark.parametrize("config, mode, names", [
    ({"mode": "AUTO"}, "auto", ["a", "b"]),
    ({"mode": "NONE"}, "none", ["a", "b"]),
    ({"mode": "ANY"}, "required", ["a", "b"]),
    ({"mode": "ANY", "allowedFunctionNames": ["b"]}, "function", ["b"]),
])
def test_function_calling_config(config, mode, names):
    job = _job({"contents": [_user("q")], "tools": [{"functionDeclarations": [{"name": "a"}, {"name": "b"}]}],
                "toolConfig": {"functionCallingConfig": config}})
    assert job.tool_choice.mode == mode and [t.name for t in job.tools] == names


@pytest.mark.parametrize("body, field", [
    ({"generationConfig": {"candidateCount": 2}}, "generationConfig.candidateCount"),
    ({"cachedContent": "cachedContents/abc"}, "cachedContent"),
    ({"generationConfig": {"responseMimeType": "text/x.enum"}}, "generationConfig.responseMimeType"),
    ({"contents": [{"role": "user", "parts": [{"fileData": {"fileUri": "gs://b/f"}}]}]}, "contents.0.parts.0.fileData"),
    ({"contents": [{"role": "user", "parts": [{"inlineData": {"mimeType": "image/png", "data": "iVBORw0K"}}]}]},
     "contents.0.parts.0.inlineData"),  # a model without vision
    ({"contents": [{"role": "user", "parts": [{"inlineData": {"mimeType": "audio/wav", "data": "UklGRg=="}}]}]},
     "contents.0.parts.0.inlineData"),
    ({"tools": [{"functionDeclarations": [{"name": "a"}]}],
      "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["zz"]}}},
     "toolConfig.functionCallingConfig"),
])
def test_what_cannot_be_served_is_a_400_naming_the_field(body, field):
    with pytest.raises(InvalidRequest) as refused:
        _job({"contents": [_user("q")]} | body)
    assert refused.value.param == field and refused.value.status == 400


def test_structured_output_and_thinking():
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    assert _job({"contents": [_user("q")], "generationConfig": {"responseMimeType": "application/json",
                                                                 "responseJsonSchema": schema}}).format == schema
    assert _job({"contents": [_user("q")], "generationConfig": {"responseMimeType": "application/json"}}
                ).format == "json"
    assert _job({"contents": [_user("q")], "generationConfig": {"responseMimeType": "application/json",
                                                                 "responseSchema": {"type": "OBJECT"}}}
                ).format == {"type": "object"}
    thinks = CHAT + ["thinking"]
    for config, think in [({"thinkingBudget": 0}, False), ({"thinkingBudget": -1}, True),
                          ({"thinkingBudget": 1024}, "low"), ({"thinkingBudget": 10000}, "medium"),
                          ({"thinkingLevel": "HIGH"}, "high"), ({"includeThoughts": True}, None)]:
        body = {"contents": [_user("q")], "generationConfig": {"thinkingConfig": config}}
        assert _job(body, thinks).think == think, config
        assert _job(body).think is None  # a model that does not think ignores it
    thought = {"contents": [_user("q"), {"role": "model", "parts": [{"text": "hmm", "thought": True},
                                                                     {"text": "a", "thoughtSignature": "c2ln"}]}]}
    assert (_job(thought, thinks).messages[1].thinking, _job(thought).messages[1].thinking) == ("hmm", "")
    assert _job(thought, thinks).messages[1].thinking_signature == "c2ln"


def test_max_output_tokens_is_clamped_to_the_context():
    assert _job({"contents": [_user("q")], "generationConfig": {"maxOutputTokens": 65536}}, context=2048
                ).options.max_tokens == 2048


def test_googles_own_tools_are_left_out_and_named():
    request = GenerateContentRequest.model_validate({"contents": [_user("q")], "tools": [
        {"googleSearch": {}}, {"codeExecution": {}}, {"functionDeclarations": [{"name": "a"}]}]})
    assert gemini.google_only_tools(request) == ["googleSearch", "codeExecution"]
    assert [t.name for t in gemini.to_tool_specs(request)] == ["a"]


def test_hints_side_calls_are_background_work():
    cli = {"User-Agent": "GeminiCLI/0.61.0/echo (linux; x64; terminal)"}
    assert not gemini.hints(cli, "echo", streamed=True).background  # a turn a person watches
    assert gemini.hints(cli, "echo", streamed=False).background  # next-speaker check, compression
    assert gemini.hints({}, "gemini-2.5-flash-lite", streamed=True).background
    assert not gemini.hints({}, "echo", streamed=False).background  # an SDK's plain call
    assert gemini.hints({"X-Session-Id": "s1"}, "echo", True).session == "s1"


def test_a_count_is_of_the_conversation():
    job = gemini.count_to_job(CountableRequest.model_validate({"contents": [_user("count me")]}), "j", "echo", CHAT)
    assert job.count_only and job.messages[0].content == "count me"


# --- job -> an upstream's request -------------------------------------------------------
def test_the_upstream_request_reads_back_as_the_same_conversation(gemini_cli_fixture):
    job = _job(gemini_cli_fixture["follow_up_turn"]["body"])
    path, body = gemini.upstream_request(job, "gemini-2.5-flash")
    assert path == "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    again = _job(body)
    assert [(m.role, m.content) for m in again.messages] == [(m.role, m.content) for m in job.messages]
    assert again.messages[2].tool_calls[0].name == "write_file"
    assert again.messages[3].tool_call_id == again.messages[2].tool_calls[0].id  # paired by name, no ids sent
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "AUTO"}}
    assert body["generationConfig"] == {"temperature": 1, "topP": 0.95, "topK": 64}
    count_path, count = gemini.count_request(job, "gemini-2.5-flash")
    assert count_path.endswith(":countTokens") and count["generateContentRequest"]["model"] == "models/gemini-2.5-flash"


# --- events -> bytes ------------------------------------------------------------------
def _writer(**kwargs) -> GenerateContentWriter:
    return GenerateContentWriter("echo", "r1", **kwargs)


def test_the_streamed_sse_bytes():
    events = [TextEvent(text="Hel"), TextEvent(text="lo"), ThinkingEvent(text="hidden"),
              ToolCallEvent(index=0, id="call_1", name="ls", arguments='{"path": "."}'), DONE]
    body = b"".join(stream(events, _writer(), sse))
    head = b'data: {"candidates":[{"content":{"parts":['
    tail = b'],"role":"model"},"index":0}],"modelVersion":"echo","responseId":"r1"}\n\n'
    assert body == (head + b'{"text":"Hel"}' + tail + head + b'{"text":"lo"}' + tail
                    + head + b'{"functionCall":{"name":"ls","args":{"path":"."}}}' + tail
                    + head + b'{"text":""}],"role":"model"},"finishReason":"STOP","index":0}],"modelVersion":"echo",'
                    b'"responseId":"r1","usageMetadata":{"promptTokenCount":7,"candidatesTokenCount":3,'
                    b'"totalTokenCount":10,"cachedContentTokenCount":4}}\n\n')


def test_no_sse_comments_for_googles_python_sdk_a_keepalive_is_an_empty_line():
    """Google's Python SDK takes every line but `data:` and empty ones for JSON."""
    tool = ServerToolEvent(phase="call", id="c", server="time", name="now")
    body = b"".join(stream([KeepAliveEvent(), TextEvent(text="a"), tool, KeepAliveEvent(), DONE], _writer(), sse))
    lines = body.split(b"\n")
    assert body.startswith(b"\ndata: {") and all(line == b"" or line.startswith(b"data: {") for line in lines)
    assert body.count(b"data: ") == 2


def test_thoughts_and_call_ids_when_the_client_asked():
    writer = _writer(thoughts=True, call_ids=True)
    assert writer.thinking("hmm")[0]["candidates"][0]["content"]["parts"] == [{"text": "hmm", "thought": True}]
    call = writer.tool_call(ToolCallEvent(index=0, id="call_1", name="ls", arguments="{}"))[0]
    assert call["candidates"][0]["content"]["parts"] == [{"functionCall": {"id": "call_1", "name": "ls", "args": {}}}]
    done = DoneEvent(reason="length", usage=Usage(prompt_tokens=1, completion_tokens=5, reasoning_tokens=2))
    last = writer.finish(done)[0]
    assert last["candidates"][0]["finishReason"] == "MAX_TOKENS"
    assert last["usageMetadata"] == {"promptTokenCount": 1, "candidatesTokenCount": 3, "totalTokenCount": 6,
                                     "thoughtsTokenCount": 2}


def test_the_json_array_bytes_keepalive_and_error_in_band():
    events = [KeepAliveEvent(), TextEvent(text="a"), KeepAliveEvent(), TextEvent(text="b"),
              ErrorEvent(message="the worker stopped", status=502)]
    body = b"".join(stream_array(events, _writer()))
    assert body.startswith(b"[\n{") and body.endswith(b"]")
    elements = json.loads(body)
    assert [e.get("error", {}).get("status") for e in elements] == [None, None, "UNAVAILABLE"]
    assert elements[2]["error"] == {"code": 502, "message": "the worker stopped", "status": "UNAVAILABLE"}
    assert body.count(b",\r\n") == 2
    array = JsonArray()
    assert array.end() == b"[]"


def test_the_whole_reply():
    reply = _writer(thoughts=True).reply(Transcript(texts=["4"], thoughts=["2+2"], done=DONE))
    assert reply["candidates"][0]["content"] == {"parts": [{"text": "2+2", "thought": True}, {"text": "4"}],
                                                 "role": "model"}
    calls = _writer().reply(Transcript(calls=[ToolCallEvent(index=0, id="c", name="ls", arguments="{}")], done=DONE))
    assert calls["candidates"][0]["content"]["parts"] == [{"functionCall": {"name": "ls", "args": {}}}]


@pytest.mark.parametrize("status, name", [(400, "INVALID_ARGUMENT"), (401, "UNAUTHENTICATED"),
                                          (403, "PERMISSION_DENIED"), (404, "NOT_FOUND"),
                                          (429, "RESOURCE_EXHAUSTED"), (503, "UNAVAILABLE")])
def test_errors_in_googles_envelope(status, name):
    assert error_body(SwitchboardError("no", status)) == {"error": {"code": status, "message": "no", "status": name}}


def test_the_model_list_pages():
    models = [{"name": f"models/m{n}"} for n in range(5)]
    first = model_page(models, "2", None)
    assert [m["name"] for m in first["models"]] == ["models/m0", "models/m1"] and first["nextPageToken"] == "models/m1"
    last = model_page(models, "2", "models/m3")
    assert [m["name"] for m in last["models"]] == ["models/m4"] and "nextPageToken" not in last


# --- a Gemini upstream's stream -> our pieces (workers/backends/gemini_upstream.py) ---------
def test_an_upstreams_objects_become_text_thoughts_calls_and_counts():
    from workers.backends.gemini_upstream import ErrorInStream, ResponseStream
    from workers.model_output import NativeCall, Thinking

    stream = ResponseStream()
    pieces = []
    for response in (
            {"candidates": [{"content": {"parts": [{"text": "plan", "thought": True}]}}]},
            {"candidates": [{"content": {"parts": [{"text": "Hel"}, {"text": "lo"}]}}]},
            {"candidates": [{"content": {"parts": [{"functionCall": {"name": "ls", "args": {"p": 1}},
                                                    "thoughtSignature": "c2ln"}]}, "finishReason": "STOP"}],
             "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 4, "thoughtsTokenCount": 2,
                               "cachedContentTokenCount": 5}}):
        pieces += stream.feed(response)
    assert pieces == [Thinking("plan"), "Hel", "lo", Thinking("", signature="c2ln"),
                      NativeCall(name="ls", arguments='{"p": 1}')]
    outcome = stream.outcome()
    assert (outcome.prompt_tokens, outcome.completion_tokens, outcome.reasoning_tokens, outcome.cached_tokens) == (
        9, 6, 2, 5)
    with pytest.raises(ErrorInStream, match="RESOURCE_EXHAUSTED: quota"):
        stream.feed({"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"}})
    cut = ResponseStream()
    cut.feed({"candidates": [{"content": {"parts": []}, "finishReason": "MAX_TOKENS"}]})
    assert cut.outcome().reason == "length"
    refused = ResponseStream()
    refused.feed({"candidates": [{"finishReason": "SAFETY"}]})
    with pytest.raises(Exception, match="SAFETY"):
        refused.outcome()


def test_a_call_that_could_not_be_read_ends_as_googles_malformed_function_call():
    done = DoneEvent(reason="malformed_call", usage=Usage(prompt_tokens=1, completion_tokens=1))
    assert _writer().finish(done)[0]["candidates"][0]["finishReason"] == "MALFORMED_FUNCTION_CALL"


def test_images_go_upstream_inline_where_they_stood_and_a_foreign_call_carries_the_placeholder():
    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
    job = _job({"contents": [{"role": "user", "parts": [{"text": "what"}, {"inlineData": {
        "mimeType": "image/png", "data": png}}, {"text": "is it?"}]}]}, CHAT + ["vision"])
    _, body = gemini.upstream_request(job, "g")
    assert body["contents"][0]["parts"] == [{"text": "what"}, {"inlineData": {"mimeType": "image/png", "data": png}},
                                            {"text": "\nis it?"}]  # (two parts were joined on a line break)
    from protocol.contract import Message, ToolCall
    foreign = job.model_copy(update={"messages": [Message(role="user", content="q"), Message(
        role="assistant", tool_calls=[ToolCall(id="call_1", name="ls", arguments="{}")])]})
    _, body = gemini.upstream_request(foreign, "g")
    assert body["contents"][1]["parts"] == [{"functionCall": {"name": "ls", "args": {}},
                                             "thoughtSignature": gemini.SKIP_SIGNATURE}]
