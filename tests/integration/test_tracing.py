"""OpenTelemetry traces end to end: two Switchboards in a chain (the front
one's model is an `openai` upstream pointing at the second, which answers
with echo), each exporting to a real OTLP/HTTP receiver started here
(tests/integration/otlp_receiver.py, decoding the protobuf). One streamed
chat from the official openai client, sent with a traceparent of its own,
is one trace across both gateways' web processes, queues, workers and the
upstream call; and nothing secret is in the exported bytes."""
from __future__ import annotations

import httpx
import openai
import pytest

from scripts.processes import ready_together, stack_env, start_web, start_worker, stop_together
from tests.integration.otlp_receiver import OtlpReceiver
from tests.integration.waits import wait_until

FRONT_KEY, BACK_KEY = "front-key-3be91c", "back-key-77d0aa"  # alice's key at the front, the front's at the back
SECRET = "the password is PLUGH-4217"
CLIENT_TRACE, CLIENT_SPAN = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
SERVER, CLIENT = 2, 3  # OTLP span kinds


@pytest.fixture(scope="module")
def chain(redis_url, tmp_path_factory):
    receiver = OtlpReceiver()
    # Databases of their own: another session stack's upstream worker would take the front's jobs on the
    # suite's database (and answer that it has no such model).
    front_redis, back_redis = (redis_url.rsplit("/", 1)[0] + f"/{db}" for db in (11, 12))
    otel = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_BSP_SCHEDULE_DELAY": "100"}
    back_env = stack_env(back_redis, SWITCHBOARD_API_KEYS=f"front:{BACK_KEY}", OTEL_SERVICE_NAME="back", **otel)
    back_worker = start_worker(back_env, concurrency=2, wait=False)
    back_web, back = start_web(back_env, wait=False)
    registry = tmp_path_factory.mktemp("chain") / "models.toml"
    registry.write_text(f'[models."chained"]\nbackend = "openai"\nbase_url = "{back}/v1"\nupstream_model = "echo"\n'
                        'api_key_env = "CHAIN_BACK_KEY"\ncontext_length = 8192\n')
    front_env = stack_env(front_redis, SWITCHBOARD_API_KEYS=f"alice:{FRONT_KEY}", SWITCHBOARD_MODELS=str(registry),
                          CHAIN_BACK_KEY=BACK_KEY, OTEL_SERVICE_NAME="front", **otel)
    front_worker = start_worker(front_env, concurrency=8, queues="upstream-completion,upstream", pool="gevent",
                                wait=False)
    front_web, front = start_web(front_env, wait=False)
    processes = [back_worker, back_web, front_worker, front_web]
    ready_together(processes)
    yield {"front": front, "back": back, "receiver": receiver}
    stop_together(processes)
    receiver.close()


def test_one_streamed_chat_is_one_trace_across_both_gateways(chain):
    receiver = chain["receiver"]
    client = openai.OpenAI(base_url=f"{chain['front']}/v1", api_key=FRONT_KEY, max_retries=0,
                           default_headers={"traceparent": f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"})
    stream = client.chat.completions.create(model="chained", stream=True, stream_options={"include_usage": True},
                                            messages=[{"role": "user", "content": SECRET}])
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == SECRET  # echo, via the chain
    expected = {("front", "POST /v1/chat/completions"), ("front", "queue"), ("front", "chat chained"),
                ("front", "POST"), ("back", "POST /v1/chat/completions"), ("back", "queue"), ("back", "chat echo")}
    spans = wait_until(lambda: (s := receiver.snapshot()) and expected <= {(x["service"], x["name"]) for x in s}
                       and s, 30, "both gateways' spans")
    assert {s["trace_id"] for s in spans} == {CLIENT_TRACE}  # one trace, the client's
    one = {(s["service"], s["name"]): s for s in spans}
    front_server, front_job = one["front", "POST /v1/chat/completions"], one["front", "chat chained"]
    upstream_call, back_server = one["front", "POST"], one["back", "POST /v1/chat/completions"]
    assert front_server["parent_id"] == CLIENT_SPAN and front_server["kind"] == SERVER
    assert one["front", "queue"]["parent_id"] == front_job["parent_id"] == front_server["span_id"]
    assert upstream_call["parent_id"] == front_job["span_id"] and upstream_call["kind"] == CLIENT
    assert back_server["parent_id"] == upstream_call["span_id"]  # the upstream continued our traceparent
    assert one["back", "queue"]["parent_id"] == one["back", "chat echo"]["parent_id"] == back_server["span_id"]
    _gen_ai_attributes(one, chunks[-1].usage)
    exported = b"".join(receiver.bodies)
    for secret in (SECRET, "PLUGH", FRONT_KEY, BACK_KEY):
        assert secret.encode() not in exported


def _gen_ai_attributes(one: dict, usage) -> None:
    job = one["front", "chat chained"]["attributes"]
    assert job["gen_ai.operation.name"] == "chat" and job["gen_ai.request.model"] == "chained"
    assert job["gen_ai.provider.name"] == "openai" and job["gen_ai.response.model"] == "echo"
    assert job["gen_ai.usage.input_tokens"] == usage.prompt_tokens > 0
    assert job["gen_ai.usage.output_tokens"] == usage.completion_tokens > 0
    assert job["gen_ai.response.finish_reasons"] == ["stop"] and job["gen_ai.server.time_to_first_token"] > 0
    server = one["front", "POST /v1/chat/completions"]["attributes"]
    assert server["switchboard.person"] == "alice" and server["http.response.status_code"] == 200
    assert server["gen_ai.request.model"] == "chained" and server["switchboard.dialect"] == "openai"
    assert one["back", "POST /v1/chat/completions"]["attributes"]["switchboard.person"] == "front"
    assert one["back", "chat echo"]["attributes"]["gen_ai.provider.name"] == "echo"
    call = one["front", "POST"]["attributes"]
    assert call["http.response.status_code"] == 200 and call["url.path"] == "/v1/chat/completions"


def test_the_request_log_names_the_trace(chain):
    """The front's record of a request carries its trace id (the console
    links it), and the back's record its own person: the front's key name."""
    reply = httpx.post(f"{chain['front']}/v1/chat/completions", headers={
        "Authorization": f"Bearer {FRONT_KEY}", "traceparent": f"00-{'ab' * 16}-{'cd' * 8}-01"},
        json={"model": "chained", "messages": [{"role": "user", "content": "hello there"}]}, timeout=30)
    assert reply.status_code == 200
    listed = lambda: httpx.get(f"{chain['front']}/admin/requests.json",  # noqa: E731
                               headers={"Authorization": f"Bearer {FRONT_KEY}"}).json()["requests"]
    record = wait_until(lambda: next((r for r in listed() if r["trace"] == "ab" * 16), None), 10, "its record")
    assert record["person"] == "alice" and record["model"] == "chained" and record["tokens_out"] > 0
