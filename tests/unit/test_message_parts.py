"""A client message of several parts is one message of the job, on every
dialect that has parts (dialects/parts.py), and each upstream kind gets the
parts back in their order."""
from __future__ import annotations

import base64

import pytest

from dialects import anthropic, openai, responses
from dialects.anthropic_schemas import MessagesRequest
from dialects.openai_schemas import ChatCompletionRequest
from dialects.parts import interleaved, joined
from dialects.responses_schemas import ResponsesRequest
from protocol.contract import Image, Job, Message

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 16).decode()
IMAGE = Image(data=PNG)


@pytest.mark.parametrize("parts, text", [
    (["prompt", "\n\n<environment_details>\nx\n</environment_details>"],
     "prompt\n\n<environment_details>\nx\n</environment_details>"),  # Kilo's: already breaks the line
    (["<system-reminder>r</system-reminder>", "say hi"], "<system-reminder>r</system-reminder>\nsay hi"),
    (["a\n", "b"], "a\nb"),
    (["part one", " part two"], "part one part two"),
    (["a", "", "b"], "a\nb"),
    ([""], ""),
], ids=["kilo", "claude-code", "ends-with-newline", "continues", "empty-part", "empty"])
def test_texts_joined_as_the_client_meant(parts, text):
    assert joined(parts) == (text, [])


def test_images_keep_their_place_and_come_back_there():
    text, images = joined(["compare", IMAGE, "with", IMAGE])
    assert text == "compare\nwith" and [i.at for i in images] == [7, 12]
    message = Message(role="user", content=text, images=images)
    assert [p if isinstance(p, str) else "IMG" for p in interleaved(message)] == ["compare", "IMG", "\nwith", "IMG"]
    assert interleaved(Message(role="user", content="x", images=[IMAGE])) == ["x", IMAGE]  # no place: after it


def _kilo_like(dialect: str) -> Job:
    first, second = "<invoke name=\"write\"></invoke>", "\n\n<environment_details>\nnow\n</environment_details>"
    if dialect == "chat":
        request = ChatCompletionRequest.model_validate({"model": "m", "messages": [
            {"role": "user", "content": [{"type": "text", "text": first}, {"type": "text", "text": second}]}]})
        return openai.chat_to_job(request, "j", "m")
    if dialect == "responses":
        request = ResponsesRequest.model_validate({"model": "m", "input": [{"role": "user", "content": [
            {"type": "input_text", "text": first}, {"type": "input_text", "text": second}]}]})
        return responses.responses_to_job(request, "j", "m", ["completion"])
    request = MessagesRequest.model_validate({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": [
        {"type": "text", "text": first}, {"type": "text", "text": second}]}]})
    return anthropic.messages_to_job(request, "j", "m", ["completion"], 8192)


@pytest.mark.parametrize("dialect", ["chat", "responses", "messages"])
def test_one_message_per_message_on_every_dialect(dialect):
    (message,) = _kilo_like(dialect).messages
    assert message.role == "user" and message.content.startswith("<invoke") and message.content.endswith(
        "</environment_details>")


def test_kilos_captured_turn_is_one_message(kilo_fixture):
    job = openai.chat_to_job(ChatCompletionRequest.model_validate(kilo_fixture["body"]), "j", "echo")
    assert [m.role for m in job.messages] == ["system", "user"]
    assert job.messages[1].content.startswith('<invoke name="write">')
    assert job.messages[1].content.endswith(kilo_fixture["echo_reply_text"])


def test_anthropic_turn_of_results_and_text_keeps_results_first():
    request = MessagesRequest.model_validate({"model": "m", "max_tokens": 5, "messages": [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"},
                                     {"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]})
    job = anthropic.messages_to_job(request, "j", "m", ["completion"], 8192)
    assert [(m.role, m.content) for m in job.messages] == [("assistant", ""), ("tool", "ok"), ("user", "a\nb")]


UPSTREAM_JOB = Job(id="j", model="m", messages=[Message(role="user", content="compare\nwith", images=[
    IMAGE.model_copy(update={"at": 7}), IMAGE.model_copy(update={"at": 12})])])


def test_openai_upstream_gets_the_parts_in_order():
    content = openai.upstream_request(UPSTREAM_JOB, "u")[1]["messages"][0]["content"]
    assert [p["type"] for p in content] == ["text", "image_url", "text", "image_url"]
    assert content[2]["text"] == "\nwith"


def test_anthropic_upstream_gets_the_blocks_in_order():
    content = anthropic.upstream_request(UPSTREAM_JOB, "u")[1]["messages"][0]["content"]
    assert [b["type"] for b in content] == ["text", "image", "text", "image"]
