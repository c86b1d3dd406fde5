"""Google's `google-genai` SDK against the Gemini API routes, on the
session's stack (keys off) and on the keyed web process (keys on, gemini-*
names mapped onto echo by an alias); and the exact bytes of Gemini CLI's own
request's stream, in both framings."""
from __future__ import annotations

import base64
import json
import math
import os
import subprocess
from pathlib import Path

import httpx
import pytest
from google import genai
from google.genai import errors, types
from pydantic import BaseModel

from tests.integration.conftest import KEY
from tests.integration.http import post_raw
from tests.integration.mcp_stack import ALICE_KEY
from tests.integration.waits import wait_until

CALL_WRITE = ('<invoke name="write_file"><parameter name="file_path">/tmp/a.txt</parameter>'
              '<parameter name="content">hello</parameter></invoke>')
WRITE_FILE = types.FunctionDeclaration(
    name="write_file", description="Write a file",
    parameters_json_schema={"type": "object", "properties": {"file_path": {"type": "string"},
                                                             "content": {"type": "string"}},
                            "required": ["file_path", "content"]})


def _client(base: str, key: str = "unused") -> genai.Client:
    return genai.Client(api_key=key, http_options=types.HttpOptions(base_url=base))


@pytest.fixture
def client(base_url):
    return _client(base_url)


def test_generate_answers_with_a_candidate_and_its_counts(client):
    response = client.models.generate_content(model="echo", contents="hello there")
    assert response.text == "hello there" and response.model_version == "echo" and response.response_id
    candidate = response.candidates[0]
    assert candidate.finish_reason == types.FinishReason.STOP and candidate.content.role == "model"
    usage = response.usage_metadata
    assert (usage.prompt_token_count, usage.candidates_token_count, usage.total_token_count) == (2, 2, 4)


def test_a_stream_of_pieces_ends_with_the_reason_and_counts(client):
    chunks = list(client.models.generate_content_stream(model="models/echo", contents="one two three"))
    assert "".join(chunk.text or "" for chunk in chunks) == "one two three" and len(chunks) >= 2
    assert chunks[-1].candidates[0].finish_reason == types.FinishReason.STOP
    assert chunks[-1].usage_metadata.candidates_token_count == 3


def test_count_is_what_the_reply_then_reports(client):
    contents = "count these five words"
    config = types.GenerateContentConfig(system_instruction="be brief")
    counted = client.models.count_tokens(model="echo", contents=contents)
    replied = client.models.generate_content(model="echo", contents=contents, config=config)
    assert counted.total_tokens == 4 and replied.usage_metadata.prompt_token_count == 6  # echo counts words


def test_embeddings_one_and_a_batch(client):
    one = client.models.embed_content(model="echo:embed", contents="a cat sat")
    vector = one.embeddings[0].values
    assert len(vector) > 8 and math.isclose(math.fsum(x * x for x in vector), 1.0, rel_tol=1e-6)
    batch = client.models.embed_content(model="echo:embed", contents=["a cat sat", "a dog ran"],
                                        config=types.EmbedContentConfig(output_dimensionality=8))
    assert [len(e.values) for e in batch.embeddings] == [8, 8]
    with pytest.raises(errors.ClientError) as refused:  # a chat-only model embeds nothing
        client.models.embed_content(model="echo:slow", contents="x")
    assert refused.value.code == 400 and refused.value.status == "INVALID_ARGUMENT"


def test_a_function_call_with_automatic_calling_off(client):
    config = types.GenerateContentConfig(tools=[types.Tool(function_declarations=[WRITE_FILE])],
                                         automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True))
    response = client.models.generate_content(model="echo", contents=f"Write it: {CALL_WRITE}", config=config)
    call = response.function_calls[0]
    assert (call.name, call.args) == ("write_file", {"file_path": "/tmp/a.txt", "content": "hello"})
    forced = client.models.generate_content(model="echo", contents=CALL_WRITE, config=config.model_copy(update={
        "tool_config": types.ToolConfig(function_calling_config=types.FunctionCallingConfig(
            mode="ANY", allowed_function_names=["write_file"]))}))
    assert forced.function_calls[0].name == "write_file"


def test_automatic_function_calling_runs_the_function_and_answers_with_its_result(client):
    written = {}

    def write_file(file_path: str, content: str) -> str:
        """Write a file."""
        written[file_path] = content
        return f"wrote {len(content)} characters"

    response = client.models.generate_content(model="echo", contents=CALL_WRITE,
                                              config=types.GenerateContentConfig(tools=[write_file]))
    assert written == {"/tmp/a.txt": "hello"} and response.text == "wrote 5 characters"
    history = response.automatic_function_calling_history
    assert [part.function_response.name for c in history for part in c.parts if part.function_response] == [
        "write_file"]


def test_json_output_parsed_by_the_sdk(client):
    class Colour(BaseModel):
        name: str
        hex: str

    config = types.GenerateContentConfig(response_mime_type="application/json", response_schema=Colour)
    response = client.models.generate_content(model="echo", contents='{"name": "teal", "hex": "#008080"}',
                                              config=config)
    assert response.parsed == Colour(name="teal", hex="#008080")  # echo answers with the prompt: the wire works


@pytest.mark.slow
def test_json_output_follows_the_schema_on_the_local_model(client):
    class Answer(BaseModel):
        colour: str

    config = types.GenerateContentConfig(response_mime_type="application/json", response_schema=Answer,
                                         max_output_tokens=60, temperature=0)
    response = client.models.generate_content(model="smollm2:135m", contents="Name a colour.", config=config)
    assert isinstance(response.parsed, Answer)


def test_errors_are_the_sdks_typed_errors(client):
    with pytest.raises(errors.ClientError) as missing:
        client.models.generate_content(model="gemini-9-ultra", contents="x")
    assert (missing.value.code, missing.value.status) == (404, "NOT_FOUND") and "echo" in missing.value.message
    with pytest.raises(errors.ClientError) as bad:
        client.models.generate_content(model="echo", contents="x",
                                       config=types.GenerateContentConfig(candidate_count=2))
    assert (bad.value.code, bad.value.status) == (400, "INVALID_ARGUMENT")
    assert "generationConfig.candidateCount" in bad.value.message


def test_the_model_list_in_googles_shape(client, base_url):
    models = {model.name: model for model in client.models.list()}
    assert "models/echo" in models and "models/echo:embed" in models
    assert models["models/echo"].supported_actions == ["generateContent", "streamGenerateContent", "countTokens"]
    assert models["models/echo:embed"].supported_actions == ["embedContent", "batchEmbedContents"]
    one = client.models.get(model="echo")
    assert one.name == "models/echo" and one.input_token_limit > one.output_token_limit > 0  # the registry's
    page = httpx.get(f"{base_url}/v1beta/models", params={"pageSize": 2}).json()
    assert len(page["models"]) == 2 and page["nextPageToken"] == page["models"][1]["name"]
    # the same route under /v1 is OpenAI's for OpenAI's clients, Google's for Google's
    assert httpx.get(f"{base_url}/v1/models").json()["object"] == "list"
    assert "models" in httpx.get(f"{base_url}/v1/models", headers={"x-goog-api-client": "genai-js/1.0"}).json()


def test_google_only_tools_are_left_out_and_said_so(base_url):
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}], "tools": [{"googleSearch": {}}]}
    status, headers, raw = post_raw(base_url, "/v1beta/models/echo:generateContent", body)
    assert status == 200 and headers["X-Switchboard-Tools-Left-Out"] == "googleSearch"
    assert json.loads(raw)["candidates"][0]["content"]["parts"] == [{"text": "hi"}]


def _frames(raw: bytes) -> list[dict]:
    assert raw.endswith(b"\n\n") and b"\r" not in raw
    frames = raw.split(b"\n\n")[:-1]
    assert all(frame.startswith(b"data: {") and b"\n" not in frame for frame in frames)
    return [json.loads(frame.removeprefix(b"data: ")) for frame in frames]


def test_gemini_clis_own_requests_stream_its_answer_and_its_tool_round(base_url, gemini_cli_fixture):
    """Its bodies as sent, on its path: whole GenerateContentResponse objects
    as `data:` lines; its tool round: a functionCall (no id: it sent none),
    then, with the function's response (ids now), the answer is its output."""
    first = json.loads(json.dumps(gemini_cli_fixture["first_turn"]["body"]))
    status, headers, raw = post_raw(base_url, gemini_cli_fixture["path"], first)
    assert status == 200 and headers["Content-Type"].startswith("text/event-stream")
    frames = _frames(raw)
    text = "".join(part.get("text", "") for f in frames for part in f["candidates"][0]["content"]["parts"])
    assert text.endswith("\nplain answer please")
    assert frames[-1]["candidates"][0]["finishReason"] == "STOP" and "usageMetadata" in frames[-1]
    first["contents"][0]["parts"][1]["text"] = gemini_cli_fixture["follow_up_turn"]["body"]["contents"][0][
        "parts"][1]["text"]  # a prompt echo answers with a call
    calls = [part["functionCall"] for f in _frames(post_raw(base_url, gemini_cli_fixture["path"], first)[2])
             for part in f["candidates"][0]["content"]["parts"] if "functionCall" in part]
    assert calls == [{"name": "write_file", "args": {"file_path": "/home/dev/project/made-by-agent.txt",
                                                     "content": "written by the agent"}}]
    follow_up = gemini_cli_fixture["follow_up_turn"]["body"]
    answer = _frames(post_raw(base_url, gemini_cli_fixture["path"], follow_up)[2])
    assert "".join(p.get("text", "") for f in answer for p in f["candidates"][0]["content"]["parts"]).startswith(
        "Successfully created and wrote to new file")


def test_without_alt_sse_the_stream_is_one_json_array(base_url):
    body = {"contents": [{"role": "user", "parts": [{"text": "one two three"}]}]}
    status, headers, raw = post_raw(base_url, "/v1/models/echo:streamGenerateContent", body)
    assert status == 200 and headers["Content-Type"].startswith("application/json")
    assert raw.startswith(b"[{") and raw.endswith(b"}]") and b",\r\n{" in raw
    elements = json.loads(raw)
    assert "".join(e["candidates"][0]["content"]["parts"][0].get("text", "") for e in elements) == "one two three"


def test_an_unknown_method_and_bad_input_are_googles_errors(base_url):
    status, _, raw = post_raw(base_url, "/v1beta/models/echo:predict", {})
    assert status == 404 and json.loads(raw)["error"]["status"] == "NOT_FOUND"
    status, _, raw = post_raw(base_url, "/v1beta/models/echo:generateContent", {"contents": "not a list"})
    error = json.loads(raw)["error"]
    assert status == 400 and error["status"] == "INVALID_ARGUMENT" and error["message"].startswith("contents")


# --- keys on, gemini-* names mapped (tests/integration/conftest.py) -------------------
def test_keys_as_the_sdk_and_gemini_cli_send_them(keyed_base, clean_redis, redis_client):
    wrong, right = _client(keyed_base, "wrong"), _client(keyed_base, KEY)  # (held: a dropped client closes)
    with pytest.raises(errors.ClientError) as refused:
        wrong.models.generate_content(model="echo", contents="x")
    assert (refused.value.code, refused.value.status) == (401, "UNAUTHENTICATED")
    assert right.models.generate_content(model="echo", contents="hi").text == "hi"  # x-goog-api-key
    body = {"contents": [{"role": "user", "parts": [{"text": "query key"}]}]}
    for url, headers in ((f"{keyed_base}/v1beta/models/echo:generateContent?key={KEY}", {}),
                         (f"{keyed_base}/v1beta/models/echo:generateContent", {"Authorization": f"Bearer {KEY}"}),
                         (f"{keyed_base}/k/{KEY}/v1beta/models/echo:generateContent", {})):
        reply = httpx.post(url, json=body, headers=headers)
        assert reply.status_code == 200, reply.text
    records = wait_until(lambda: len(rows := httpx.get(f"{keyed_base}/admin/requests.json",
                                                       headers={"x-goog-api-key": KEY}).json()["requests"]) >= 4
                         and rows, what="the four requests' records")
    assert {r["person"] for r in records} == {"alice"} and {r["dialect"] for r in records} == {"gemini"}
    assert KEY not in json.dumps(records)


def test_gemini_names_are_served_by_their_alias(keyed_base, clean_redis):
    client = _client(keyed_base, KEY)
    response = client.models.generate_content(model="gemini-2.5-flash-lite", contents="title")
    assert (response.model_version, response.text) == ("echo", "title")
    assert not any(model.name.startswith("models/gemini") for model in client.models.list())


# --- thinking, through the upstream stack's echo with think tags ------------------------
def test_thoughts_are_parts_marked_thought_when_asked(upstreams):
    client = _client(upstreams["base"])
    config = types.GenerateContentConfig(thinking_config=types.ThinkingConfig(include_thoughts=True))
    response = client.models.generate_content(model="think-tags", contents="<think>2 and 2</think>4", config=config)
    parts = response.candidates[0].content.parts
    assert [(p.thought, p.text) for p in parts] == [(True, "2 and 2"), (None, "4")]
    hidden = client.models.generate_content(model="think-tags", contents="<think>2 and 2</think>4")
    assert hidden.text == "4" and len(hidden.candidates[0].content.parts) == 1


# --- a `gemini` upstream: the upstream stack's gemini-sb is the session's Gemini routes -------
def test_a_gemini_upstream_behind_every_dialect(upstreams):
    base = upstreams["base"]
    client = _client(base)
    assert client.models.generate_content(model="gemini-sb", contents="hello chain").text == "hello chain"
    pieces = list(client.models.generate_content_stream(model="gemini-sb", contents="one two three"))
    assert "".join(p.text or "" for p in pieces) == "one two three"
    assert pieces[-1].usage_metadata.prompt_token_count == 3  # the upstream's counts, read back
    assert client.models.count_tokens(model="gemini-sb", contents="count these words").total_tokens == 3
    config = types.GenerateContentConfig(tools=[types.Tool(function_declarations=[WRITE_FILE])],
                                         automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True))
    call = client.models.generate_content(model="gemini-sb", contents=CALL_WRITE, config=config).function_calls[0]
    assert (call.name, call.args) == ("write_file", {"file_path": "/tmp/a.txt", "content": "hello"})
    # the SDK sends a gemini-* model's contents as one multimodal content: one vector; a batch of two is two
    assert len(client.models.embed_content(model="gemini-embed", contents=["a cat", "a dog"]).embeddings) == 1
    batch = httpx.post(f"{base}/v1beta/models/gemini-embed:batchEmbedContents", json={"requests": [
        {"content": {"parts": [{"text": "a cat"}]}}, {"content": {"parts": [{"text": "a dog"}]}}]}).json()
    assert [len(e["values"]) > 8 for e in batch["embeddings"]] == [True, True]
    chat = httpx.post(f"{base}/v1/chat/completions", json={"model": "gemini-sb", "messages": [
        {"role": "user", "content": "via openai"}]}).json()
    assert chat["choices"][0]["message"]["content"] == "via openai"


# --- Google's GenAI SDK for node, on the Node 22 it needs (tests/agents) ------------------------
AGENTS = Path(__file__).resolve().parent.parent / "agents"


def test_the_node_sdk_streams_an_answer_and_makes_a_call(base_url):
    node = AGENTS / "node_modules" / ".bin" / "node"
    assert node.exists(), f"{node} is missing: run `make install-dev`"
    done = subprocess.run([str(node), str(AGENTS / "genai_check.mjs")], capture_output=True, text=True, timeout=60,
                          env={"PATH": os.environ["PATH"], "BASE": base_url, "CALL": CALL_WRITE})
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert (seen["text"], seen["finish"], seen["usage"]["totalTokenCount"]) == ("one two three", "STOP", 6)
    assert seen["calls"] == [{"name": "write_file", "args": {"file_path": "/tmp/a.txt", "content": "hello"}}]


def test_server_side_tools_run_for_a_gemini_client(mcp_stack):
    """echo:tools calls the time server itself (on the MCP stack: its MCP pool runs the call): the answer is the
    tool's result, no call reaches the client."""
    client = _client(mcp_stack[0], ALICE_KEY)
    call = ('<invoke name="get_current_time"><parameter name="timezone">Asia/Tokyo</parameter></invoke>')
    response = client.models.generate_content(model="echo:tools", contents=call)
    assert '"timezone": "Asia/Tokyo"' in response.text and not response.function_calls
    streamed = "".join(p.text or "" for p in client.models.generate_content_stream(model="echo:tools", contents=call))
    assert '"timezone": "Asia/Tokyo"' in streamed


def test_a_call_echo_cuts_off_ends_as_a_malformed_function_call(client):
    """An emulated call of a declared tool that cannot be read goes on as
    text, and the reply says so (Google's MALFORMED_FUNCTION_CALL)."""
    cut = '<invoke name="write_file"><parameter name="file_path">/tmp/a.txt'
    config = types.GenerateContentConfig(tools=[types.Tool(function_declarations=[WRITE_FILE])],
                                         automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True))
    response = client.models.generate_content(model="echo", contents=cut, config=config)
    assert response.candidates[0].finish_reason == types.FinishReason.MALFORMED_FUNCTION_CALL
    assert response.text == cut and not response.function_calls


def test_an_inline_image_reaches_a_vision_upstream(upstreams):
    """inlineData images on a vision model: to an OpenAI-compatible upstream as image parts, in their place."""
    from tests.integration.test_upstream import PNG, last_request

    client = _client(upstreams["base"])
    image = types.Part.from_bytes(data=base64.b64decode(PNG), mime_type="image/png")
    client.models.generate_content(model="vision", contents=[types.Content(role="user", parts=[
        types.Part.from_text(text="What is this?"), image])])
    assert last_request(upstreams, "/v1/chat")["messages"][-1]["content"] == [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}]
