"""What an upstream of each dialect is sent, per job shape (the upstream
side of dialects/openai.py and dialects/ollama.py)."""
from dialects import ollama, openai
from protocol.contract import Job, Message, PromptSpec, SamplingOptions, ToolCall, ToolSpec
from workers.backends import sse
CHAT = Job(id="j", model="m", messages=[Message(role="user", content="hi")],
           options=SamplingOptions(max_tokens=5, stop=["x"], temperature=0.1, top_k=3))
RAW = Job(id="j", model="m", prompt=PromptSpec(prompt="<PRE> a <SUF>b <MID>", raw=True),
          options=SamplingOptions(max_tokens=5))


def test_openai_chat_and_format():
    path, body = openai.upstream_request(CHAT.model_copy(update={"format": {"type": "object"}}), "big")
    assert path == "/chat/completions"
    assert body == {"model": "big", "messages": [{"role": "user", "content": "hi"}], "stream": True,
                    "stream_options": {"include_usage": True}, "max_tokens": 5, "temperature": 0.1, "stop": ["x"],
                    "response_format": {"type": "json_schema", "json_schema": {"name": "output",
                                                                               "schema": {"type": "object"}}}}
    assert openai.upstream_request(CHAT.model_copy(update={"format": "json"}), "big")[1]["response_format"] == {
        "type": "json_object"}


def test_openai_raw_prompt_uses_completions():
    path, body = openai.upstream_request(RAW, "big")
    assert path == "/completions" and body["prompt"] == "<PRE> a <SUF>b <MID>" and "messages" not in body


def test_ollama_raw_prompt_uses_generate_with_options_format_and_keep_alive():
    job = RAW.model_copy(update={"format": "json", "keep_alive": 0.0})
    path, body = ollama.upstream_request(job, "big")
    assert path == "/api/generate"
    assert body == {"model": "big", "stream": True, "options": {"num_predict": 5}, "format": "json",
                    "keep_alive": 0.0, "prompt": "<PRE> a <SUF>b <MID>", "raw": True}


def test_ollama_chat_converts_tool_calls_and_names_results():
    job = Job(id="j", model="m", tools=[ToolSpec(name="grep")], messages=[
        Message(role="assistant", tool_calls=[ToolCall(id="c1", name="grep", arguments='{"q": "x"}')]),
        Message(role="tool", tool_call_id="c1", content="found")], options=SamplingOptions(top_k=3, stop=["s"]))
    path, body = ollama.upstream_request(job, "big")
    assert path == "/api/chat" and body["options"] == {"top_k": 3, "stop": ["s"]}
    assert body["messages"] == [
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "grep", "arguments": {"q": "x"}}}]},
        {"role": "tool", "content": "found", "tool_name": "grep"}]
    assert body["tools"][0]["function"]["name"] == "grep"


def test_sse_payloads_read_the_body_to_its_end_so_the_connection_is_reused():
    consumed = []

    def arrivals():
        for lines in [['data: {"a": 1}', "", 'data: {"b": 2}'], ["", "data: [DONE]", ""], [": end"]]:
            consumed.append(lines)
            yield lines

    assert list(sse.sse_payloads(arrivals())) == [[{"a": 1}, {"b": 2}], []]
    assert consumed[-1] == [": end"]
