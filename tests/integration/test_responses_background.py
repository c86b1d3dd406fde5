"""Background responses with the official openai SDK (and raw bytes for the
log): queued at once and polled to the end; a stream cut and resumed with
`starting_after` gives exactly the events it missed; the client leaving does
not stop it, its owner cancelling does; private to the key; one left
running by a web process that died is failed, not left running forever."""
from __future__ import annotations

import signal

import httpx
import openai
import pytest

from jobqueue.records import job_state
from ledger import request_log
from ledger.usage import totals_by_person, usage
from scripts.processes import stack_env, start_web
from tests.integration.conftest import KEY, OTHER_KEY
from tests.integration.http import DroppableStream
from tests.integration.test_abort import LONG_TEXT
from tests.integration.waits import wait_until

SHORT_SLOW = " ".join(f"w{i}" for i in range(30))  # 1.5 s at echo:slow's 50 ms a token


def client_for(base: str, key: str = "unused") -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0)


def ended(client: openai.OpenAI, response_id: str, timeout: float = 30):
    return wait_until(lambda: (r := client.responses.retrieve(response_id)).status not in ("queued", "in_progress")
                      and r, timeout, f"{response_id} to end")


def test_queued_at_once_then_polled_to_its_end(base_url):
    client = client_for(base_url)
    queued = client.responses.create(model="echo", input="in the background", background=True)
    assert (queued.status, queued.background, queued.output) == ("queued", True, [])
    done = ended(client, queued.id)
    assert done.status == "completed" and done.output_text == "in the background" and done.background is True


def test_vendor_only_tools_are_named_in_the_header_of_a_queued_answer_too(base_url):
    """(note_tools_left_out says so on whatever response the view makes, not only a served one.)"""
    body = {"model": "echo", "input": "hi", "background": True, "tools": [{"type": "web_search"}]}
    queued = httpx.post(f"{base_url}/v1/responses", json=body)
    assert queued.json()["status"] == "queued" and queued.headers["X-Switchboard-Tools-Left-Out"] == "web_search"
    ended(client_for(base_url), queued.json()["id"])


def test_its_request_log_record_is_written_when_its_job_ends(base_url, redis_client):
    """The request answered at once; its record waits for the job (finish
    reason, tokens, a total longer than the request's own answer)."""
    client = client_for(base_url)
    queued = client.responses.create(model="echo:slow", input=SHORT_SLOW, background=True)
    ended(client, queued.id)
    records = wait_until(lambda: request_log.read(redis_client, request_log.Filter(model="echo:slow"))[0], 10,
                         "the record")
    assert len(records) == 1 and records[0]["route"] == "/v1/responses" and records[0]["status"] == 200
    assert records[0]["finish"] == "stop" and records[0]["tokens_out"] == 30 and records[0]["total_ms"] > 1000


def test_a_stream_cut_and_resumed_misses_nothing_and_repeats_nothing(base_url):
    """Six events read, the connection dropped; the rest from starting_after
    5; both together are the whole log of the same job, byte for byte."""
    stream = DroppableStream(base_url, "/v1/responses", {"model": "echo:slow", "input": SHORT_SLOW,
                                                         "background": True, "stream": True})
    head = b""
    while head.count(b"\n\n") < 6:
        head += stream.read_line()
    stream.drop()
    response_id = head.split(b'"id":"', 1)[1].split(b'"', 1)[0].decode()
    rest = httpx.get(f"{base_url}/v1/responses/{response_id}", params={"stream": "true", "starting_after": 5},
                     timeout=60).content
    whole = httpx.get(f"{base_url}/v1/responses/{response_id}", params={"stream": "true"}, timeout=60).content
    assert rest.startswith(b"event: response.") and b'"sequence_number":6,' in rest.split(b"\n\n")[0]
    assert head + rest == whole
    assert whole.split(b"\n\n")[-2].startswith(b"event: response.completed\n")
    resumed = list(client_for(base_url).responses.retrieve(response_id, stream=True, starting_after=5))
    assert [e.sequence_number for e in resumed] == list(range(6, 6 + len(resumed)))


def test_a_stream_waits_on_its_log_on_a_connection_of_its_own(base_url, redis_client):
    """It blocks on the log (XREAD BLOCK) on a connection opened for it, so a
    waiting reader never holds one of the pool every request shares; the
    connection is closed when the stream ends."""
    queued = client_for(base_url).responses.create(model="echo:slow", input=SHORT_SLOW, background=True)
    database = str(redis_client.connection_pool.connection_kwargs.get("db", 0))  # (another test process's are not)
    replays = lambda: [c for c in redis_client.client_list() if c["name"] == "switchboard-web-replay"  # noqa: E731
                       and c["db"] == database]
    with httpx.stream("GET", f"{base_url}/v1/responses/{queued.id}", params={"stream": "true"}, timeout=60) as got:
        lines = got.iter_lines()
        assert next(lines).startswith("event: response.created")
        wait_until(lambda: any(c["cmd"] == "xread" for c in replays()), 10, "its read blocked on the log")
        rest = "\n".join(lines)
    assert "event: response.completed" in rest
    wait_until(lambda: not replays(), 10, "its connection closed")


def test_its_client_leaving_does_not_stop_it(base_url):
    stream = DroppableStream(base_url, "/v1/responses", {"model": "echo:slow", "input": SHORT_SLOW,
                                                         "background": True, "stream": True})
    created = stream.read_line() + stream.read_line()
    stream.drop()
    response_id = created.split(b'"id":"', 1)[1].split(b'"', 1)[0].decode()
    assert ended(client_for(base_url), response_id).output_text == SHORT_SLOW


def test_cancelling_stops_its_job_and_counts_an_abort(base_url, redis_client, tap):
    client = client_for(base_url)
    running = client.responses.create(model="echo:slow", input=LONG_TEXT, background=True)
    wait_until(lambda: client.responses.retrieve(running.id).status == "in_progress", 30, "it to start")
    assert client.responses.cancel(running.id).status == "cancelled"
    _, job_id = tap.wait_for_abort()
    wait_until(lambda: job_state(redis_client, job_id).get("reason") == "aborted", 10, "the job to be aborted")
    assert client.responses.retrieve(running.id).status == "cancelled"
    assert [e.type for e in client.responses.retrieve(running.id, stream=True)][-1] == "response.output_text.delta"
    assert client.responses.cancel(running.id).status == "cancelled"  # again: as it is
    counted = wait_until(lambda: totals_by_person(usage(redis_client)), 10, "its outcome to be counted")
    assert [(p["aborts"], p["errors"]) for p in counted.values()] == [(1, 0)]
    with pytest.raises(openai.BadRequestError):
        client.responses.cancel(client.responses.create(model="echo", input="not background").id)


def test_background_needs_store_and_is_private_to_its_key(keyed_base, clean_redis):
    alice, bob = client_for(keyed_base, KEY), client_for(keyed_base, OTHER_KEY)
    with pytest.raises(openai.BadRequestError) as refused:
        alice.responses.create(model="echo", input="x", background=True, store=False)
    assert refused.value.body["param"] == "store"
    mine = alice.responses.create(model="echo:slow", input=SHORT_SLOW, background=True)
    for attempt in (lambda: bob.responses.retrieve(mine.id), lambda: bob.responses.cancel(mine.id),
                    lambda: list(bob.responses.retrieve(mine.id, stream=True))):
        with pytest.raises(openai.NotFoundError):
            attempt()
    assert ended(alice, mine.id).status == "completed"


def test_one_left_running_by_a_web_process_that_died_is_failed(stack, redis_url, base_url):
    web, lost = start_web(stack_env(redis_url))
    try:
        running = client_for(lost).responses.create(model="echo:slow", input=LONG_TEXT, background=True)
        wait_until(lambda: client_for(base_url).responses.retrieve(running.id).status == "in_progress", 30,
                   "it to start")
        web.stop(signal.SIGKILL)
        failed = ended(client_for(base_url), running.id, timeout=30)  # its lease lapses in 8 s
        assert failed.status == "failed" and "create it again" in failed.error.message
    finally:
        web.stop()


def test_only_a_background_response_streams_again_and_deleting_takes_its_log(base_url, redis_client):
    client = client_for(base_url)
    plain = client.responses.create(model="echo", input="not background")
    with pytest.raises(openai.BadRequestError) as refused:
        list(client.responses.retrieve(plain.id, stream=True))
    assert refused.value.body["param"] == "stream"
    done = ended(client, client.responses.create(model="echo", input="to delete", background=True).id)
    client.responses.delete(done.id)
    assert [key for key in redis_client.keys(f"*{done.id}*")] == []
