"""Routes with a scripted job source: exact bytes, including in-band errors."""
from __future__ import annotations

import gc
import json
from pathlib import Path

import pytest

from dialects.hints import session_of
from jobqueue import charges
from jobqueue.records import is_aborted
from ledger import usage
from protocol.contract import PromptSpec
from protocol.events import DoneEvent, ErrorEvent, TextEvent, Usage

DONE = DoneEvent(reason="stop", usage=Usage(prompt_tokens=1, completion_tokens=2))


def test_an_error_after_text_is_in_band_on_ndjson(scripted):
    scripted.replies.append([TextEvent(text="Hi"), ErrorEvent(message="worker died", status=500)])
    response = scripted.client.post("/api/chat", json={"model": "echo", "messages": [{"role": "user", "content": "x"}]})
    assert response.status_code == 200
    lines = response.data.split(b"\n")
    assert lines[-1] == b"" and json.loads(lines[-2]) == {"error": "worker died"}


def test_an_error_after_text_is_in_band_on_sse_then_done(scripted):
    scripted.replies.append([TextEvent(text="Hi"), ErrorEvent(message="worker died", status=500)])
    response = scripted.client.post("/v1/chat/completions", json={
        "model": "echo", "stream": True, "messages": [{"role": "user", "content": "x"}]})
    frames = response.data.split(b"\n\n")
    assert frames[-4] == b'data: {"error":{"message":"worker died","type":"server_error","param":null,"code":null}}'
    assert json.loads(frames[-3].removeprefix(b"data: "))["choices"][0]["finish_reason"] == "error"
    assert frames[-2:] == [b"data: [DONE]", b""]


@pytest.mark.parametrize("path, body, expected", [
    ("/api/chat", {"messages": [{"role": "user", "content": "x"}]}, {"error": "model too large"}),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}]},
     {"error": {"message": "model too large", "type": "invalid_request_error", "param": None, "code": None}}),
], ids=["ollama", "openai"])
def test_an_error_before_any_text_gets_a_real_status(scripted, path, body, expected):
    scripted.replies.append([ErrorEvent(message="model too large", status=400)])
    response = scripted.client.post(path, json={"model": "echo", **body, "stream": True})
    assert response.status_code == 400 and response.json == expected


def test_a_finished_job_is_not_aborted_and_an_abandoned_one_is(scripted):
    scripted.replies.append([TextEvent(text="a"), DONE])
    response = scripted.client.post("/api/chat", json={"model": "echo", "messages": [{"role": "user", "content": "x"}]})
    assert json.loads(response.data.split(b"\n")[-2])["done"] is True
    response.close()
    finished = scripted.jobs[-1][0]
    scripted.replies.append([TextEvent(text="a"), TextEvent(text="b")])
    response = scripted.client.post("/api/chat", json={"model": "echo", "messages": [{"role": "user", "content": "x"}]},
                                    buffered=False)
    next(response.response)  # the client reads one line, then goes away
    response.close()
    abandoned = scripted.jobs[-1][0]
    redis = scripted.client.application.extensions["switchboard"].redis
    assert not is_aborted(redis, finished.id) and is_aborted(redis, abandoned.id)


@pytest.mark.parametrize("final, counted_here", [
    (DONE, None), (ErrorEvent(message="model too large", status=400),
                   {"requests": 1, "prompt_tokens": 0, "completion_tokens": 0, "errors": 1, "aborts": 0})],
    ids=["finished-its-worker-counted-it", "failed"])
def test_the_web_process_counts_a_requests_usage_unless_it_finished(scripted, final, counted_here):
    scripted.replies.append([TextEvent(text="a"), final])
    response = scripted.client.post("/api/chat", json={"model": "echo", "messages": [{"role": "user", "content": "x"}]})
    response.close()
    job = scripted.jobs[-1][0]
    assert job.usage_of == "address:127.0.0.1"  # the person the worker counts it for
    redis = scripted.client.application.extensions["switchboard"].redis
    assert usage.usage(redis).get(job.usage_of, {}).get("echo") == counted_here


def test_jobs_go_to_the_models_pool_with_translated_options(scripted):
    scripted.replies.append([DONE])
    scripted.client.post("/api/generate", json={
        "model": "echo:latest", "prompt": "p", "system": "s", "stream": False,
        "options": {"num_predict": -1, "stop": "x", "seed": 3, "mirostat": 2}})
    job, queue = scripted.jobs[0]
    assert queue == "local" and job.model == "echo"
    assert job.charge == charges.estimate(job)  # what its person's share is charged, until its worker settles it
    assert job.prompt == PromptSpec(prompt="p", system="s") and job.messages == []
    assert (job.options.max_tokens, job.options.stop, job.options.seed) == (None, ["x"], 3)


def test_raw_and_fim_completions_go_to_the_priority_queue(scripted):
    scripted.replies += [[DONE], [DONE]]
    scripted.client.post("/api/generate", json={"model": "echo", "prompt": "p", "raw": True, "stream": False})
    scripted.client.post("/api/generate", json={"model": "echo:coder", "prompt": "p", "suffix": "s", "stream": False})
    assert [q for _, q in scripted.jobs] == ["local-completion", "local-completion"]


@pytest.mark.parametrize("body, message", [
    ({"raw": True, "system": "s"}, "raw mode does not support template, system, or context"),
    ({"raw": True, "template": "{{ .Prompt }}"}, "raw mode does not support template, system, or context"),
    ({"raw": True, "context": [1, 2]}, "raw mode does not support template, system, or context"),
    ({"suffix": "after"}, '"echo" does not support insert'),
    ({"images": ["aGk="]}, 'images: "echo" does not support images (it has no vision capability)'),
    ({"keep_alive": "5 minutes"}, "keep_alive: invalid duration '5 minutes'"),
    ({"keep_alive": 10**400}, f"keep_alive: {10**400!r} is longer than 10 years; use a negative value to keep the "
                              "model loaded for good"),  # too large for a float: found by the fuzz test
    ({"format": "yaml"}, "format: Input should be 'json' or ''"),
], ids=["raw-system", "raw-template", "raw-context", "insert", "images", "keep-alive", "keep-alive-huge", "format"])
def test_generate_rules(scripted, body, message):
    response = scripted.client.post("/api/generate", json={"model": "echo", "prompt": "p", **body})
    assert (response.status_code, response.json) == (400, {"error": message})


@pytest.mark.parametrize("value, seconds", [
    (None, None), (0, 0.0), (30, 30.0), ("10s", 10.0), ("5m", 300.0), ("1h30m", 5400.0), ("-1", -1.0), ("-1m", -60.0),
    ("250ms", 0.25)])
def test_keep_alive_durations(value, seconds):
    from dialects.ollama import keep_alive_seconds

    assert keep_alive_seconds(value) == seconds


@pytest.mark.parametrize("path, body, status, message", [
    ("/api/chat", b"{", 400, "invalid JSON body: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"),
    ("/api/chat", b"[]", 400, "the request body must be a JSON object"),
    ("/api/chat", b'{"messages": [{"role": "user", "content": "x"}]}', 400, "model: Field required"),
    ("/api/show", b"{}", 400, "Value error, model is required"),
    ("/api/show", b'{"model": "gone"}', 404, 'model "gone" not found, try pulling it first'),
    ("/api/generate", b'{"model": "echo", "options": {"temperature": "hot"}}', 400,
     "options.temperature: Input should be a valid number, unable to parse string as a number"),
], ids=["json", "not-object", "no-model", "show-empty", "show-missing", "option-type"])
def test_ollama_bad_input(scripted, path, body, status, message):
    response = scripted.client.post(path, data=body, content_type="application/json")
    assert (response.status_code, response.json) == (status, {"error": message})


@pytest.mark.parametrize("body, param", [
    ({"model": "echo", "messages": [{"role": "user", "content": "x"}], "n": 2}, "n"),
    ({"model": "echo", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
     "messages.0.content"),
    ({"model": "echo", "messages": [{"role": "user", "content": [{"type": "audio"}]}]}, "messages.0.content.0"),
    ({"model": "echo", "messages": [{"role": "user", "content": "x"}], "max_tokens": 0}, "max_tokens"),
], ids=["n", "image", "part-type", "max-tokens"])
def test_openai_bad_input_names_the_field(scripted, body, param):
    response = scripted.client.post("/v1/chat/completions", json=body)
    assert response.status_code == 400 and response.json["error"]["param"] == param
    assert response.json["error"]["type"] == "invalid_request_error"


def test_an_answer_that_cannot_be_stored_still_answers_and_says_so(scripted, monkeypatch):
    """Redis went away between the answer and its storing (a failover): the
    answer was made and counted, so the client gets it, marked not stored."""
    import redis

    from app import stored_responses

    def lost(*_, **__):
        raise redis.ConnectionError("Redis went away")
    monkeypatch.setattr(stored_responses, "save", lost)
    scripted.replies.append([TextEvent(text="kept?"), DONE])
    response = scripted.client.post("/v1/responses", json={"model": "echo", "input": "hi", "store": True})
    assert response.status_code == 200
    body = response.get_json()
    assert body["status"] == "completed" and body["store"] is False
    assert body["output"][0]["content"][0]["text"] == "kept?"


@pytest.mark.parametrize("query, field", [
    ("count=abc", "count"), ("count=[1]", "count"), ("from=garbage", "from"), ("from=1900-01-01", "from"),
    ("to=99999999999999999999999999", "to"), ("before=xyz", "before"), ("before=99999999999999999999-0", "before")])
def test_the_request_log_names_a_bad_query_parameter(scripted, query, field):
    """Each is a 400 naming its parameter before Redis is asked (which
    refuses ids past 64 bits or before 1970 with an error, not a 400)."""
    reply = scripted.client.get(f"/admin/requests.json?{query}")
    assert reply.status_code == 400 and reply.get_json()["error"]["param"] == field, reply.get_json()


@pytest.mark.parametrize("path, body", [
    ("/api/chat", {"model": "echo", "messages": [{"role": "user", "content": "x"}]}),
    ("/v1/chat/completions", {"model": "echo", "stream": True, "messages": [{"role": "user", "content": "x"}]}),
    ("/v1/messages", {"model": "echo", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]})])
def test_a_served_request_leaves_no_reference_cycles(scripted, path, body):
    """A request's response, job and record are freed as soon as it ends: a
    cycle among them would hold each request's parsed body and job until the
    collector's next full pass, and make every pass slower."""
    scripted.replies += [[TextEvent(text="a"), DONE], [TextEvent(text="a"), DONE]]
    scripted.client.post(path, json=body).close()  # (the first request builds what the process keeps)
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        scripted.client.post(path, json=body).close()
        gc.collect()
        ours = {"app", "flask", "protocol", "jobqueue", "dialects"}  # (the test client's own Request has a cycle)
        left = [type(o).__name__ for o in gc.garbage if type(o).__module__.split(".")[0] in ours]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert left == []


def test_a_job_carries_its_agent_session_scoped_to_its_person(scripted):
    """Claude Code's and Codex's own requests (tests/fixtures): the session
    each names, as a digest of the person and the client's id; none for a
    request that names no session."""
    fixtures = Path(__file__).resolve().parent.parent / "fixtures"
    sessions = []
    for name, said in (("claude-code-messages-request.json", "X-Claude-Code-Session-Id"),
                       ("codex-responses-request.json", "session-id")):
        sent = json.loads((fixtures / name).read_text())
        scripted.replies.append([TextEvent(text="a"), DONE])
        scripted.client.post(sent["path"], json=sent["body"], headers={
            k: v for k, v in sent["headers"].items() if k.lower() not in ("content-type", "accept-encoding")}).close()
        job = scripted.jobs[-1][0]
        assert job.session == session_of("address:127.0.0.1", sent["headers"][said]) and len(job.session) == 32
        sessions.append(job.session)
    assert sessions[0] != sessions[1] != session_of("bob", "40c4625d-9664-4781-98bb-986182ea97a6")
    scripted.replies.append([DONE])
    scripted.client.post("/v1/chat/completions", json={"model": "echo", "messages": [{"role": "user", "content": "x"}]})
    assert scripted.jobs[-1][0].session == ""


def test_a_chain_of_responses_is_a_session_unless_the_client_names_one(scripted):
    """Clients without a session header (the OpenAI SDKs): the turns that
    continue a stored response share the session of its chain's first one."""
    def turn(previous: str | None, **headers) -> tuple[str, str]:
        scripted.replies.append([TextEvent(text="a"), DONE])
        body = {"model": "echo", "input": "x"} | ({"previous_response_id": previous} if previous else {})
        response = scripted.client.post("/v1/responses", json=body, headers=headers)
        return response.get_json()["id"], scripted.jobs[-1][0].session
    first, alone = turn(None)
    second, session = turn(first)
    third, same = turn(second)
    assert alone == "" and session == same == session_of("address:127.0.0.1", f"response:{first}")
    assert turn(third, **{"X-Session-Id": "mine"})[1] == session_of("address:127.0.0.1", "mine")
