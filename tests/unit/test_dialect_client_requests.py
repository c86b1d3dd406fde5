"""The client side of both dialects' mappings (request -> Job), and the
writers' first and last objects."""
from __future__ import annotations

from app.streaming import ndjson, sse
from dialects import ollama, ollama_writer, openai, openai_writer
from dialects.ollama_schemas import ChatRequest
from dialects.openai_schemas import ChatCompletionRequest
from dialects.writer import Transcript
from protocol.events import DoneEvent, Timings, Usage

DONE = DoneEvent(reason="length", usage=Usage(prompt_tokens=4, completion_tokens=2),
                 timings=Timings(load_ns=1, prompt_eval_ns=2, eval_ns=3, total_ns=7))


def test_openai_request_to_job(copilot_fixture):
    request = ChatCompletionRequest.model_validate(copilot_fixture["first_turn"])
    job = openai.chat_to_job(request, "id1", "smollm2:135m")
    # Copilot's user message is two text parts: one message of the job (dialects/parts.py)
    assert [m.role for m in job.messages] == ["system", "system", "user"]
    assert job.messages[2].content.startswith("<attachments>") and "<userRequest>" in job.messages[2].content
    assert job.options.temperature == 0 and job.options.top_p == 1 and job.options.max_tokens is None


def test_openai_developer_role_and_limits():
    request = ChatCompletionRequest.model_validate({
        "model": "m", "messages": [{"role": "developer", "content": "d"}, {"role": "user", "content": None}],
        "max_tokens": 5, "max_completion_tokens": 7, "stop": "END", "prompt_cache_key": "team-prompt"})
    job = openai.chat_to_job(request, "id", "m")
    assert [(m.role, m.content) for m in job.messages] == [("system", "d"), ("user", "")]
    assert job.options.max_tokens == 7 and job.options.stop == ["END"]
    assert job.cache_key == "team-prompt"


def test_openai_chunks_and_completion():
    chunks = openai_writer.ChatWriter("c1", "m", 10, include_usage=True)
    assert chunks.opening()[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert chunks.text("x")[0]["usage"] is None
    finish, usage = chunks.finish(DONE)
    assert finish["choices"][0] == {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "length"}
    assert usage["choices"] == [] and usage["usage"] == {"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6}
    body = openai_writer.ChatWriter("c1", "m", 10).reply(Transcript(["hello"], [], DONE))
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "hello"}
    assert "usage" not in openai_writer.ChatWriter("c1", "m", 10, include_usage=False).text("x")[0]


def test_ollama_request_to_job_and_last_line():
    request = ChatRequest.model_validate({"model": "m", "messages": [{"role": "user", "content": "q"}],
                                          "options": {"num_predict": 9, "top_k": 5, "stop": ["a", "b"]}})
    job = ollama.chat_to_job(request, "id", "m", ["completion"])
    assert (job.options.max_tokens, job.options.top_k, job.options.stop) == (9, 5, ["a", "b"])
    last = ollama_writer.ChatWriter("m").finish(DONE)[0]
    assert last["message"] == {"role": "assistant", "content": ""} and last["done"] is True
    assert {k: last[k] for k in ("done_reason", "total_duration", "load_duration", "prompt_eval_count",
                                 "prompt_eval_duration", "eval_count", "eval_duration")} == {
        "done_reason": "length", "total_duration": 7, "load_duration": 1, "prompt_eval_count": 4,
        "prompt_eval_duration": 2, "eval_count": 2, "eval_duration": 3}


def test_framing_bytes():
    assert sse({"a": "é"}) == 'data: {"a":"é"}\n\n'.encode()
    assert ndjson({"a": [1, 2]}) == b'{"a":[1,2]}\n'


def test_openai_text_parts_are_one_message_with_its_calls():
    request = ChatCompletionRequest.model_validate({"model": "m", "messages": [
        {"role": "user", "content": [{"type": "text", "text": "part one"}, {"type": "text", "text": "part two"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}]})
    job = openai.chat_to_job(request, "id", "m")
    assert [(m.role, m.content, len(m.tool_calls)) for m in job.messages] == [
        ("user", "part one\npart two", 0), ("assistant", "a\nb", 1)]


def test_ollama_think_needs_the_thinking_capability():
    import pytest

    from protocol.errors import InvalidRequest

    request = ChatRequest.model_validate({"model": "echo", "think": True, "messages": []})
    with pytest.raises(InvalidRequest, match='"echo" does not support thinking'):
        ollama.chat_to_job(request, "id", "echo", ["completion"])
    assert ollama.chat_to_job(request.model_copy(update={"think": False}), "id", "echo", ["completion"])
