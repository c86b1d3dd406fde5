"""The guard's step in the worker (workers/secrets_guard.py) on a fake Redis:
policies and their defaults, a job redacted and the same placeholders on
the next turn, the reply restored (cut across pieces, in a native call's
JSON), only a person's own values restored, a refusal that names kinds and
places, what is remembered."""
from __future__ import annotations

import json
from ipaddress import ip_network

import fakeredis
import pytest

import workers.secrets_guard as secrets_guard
from catalog.registry import parse_entry
from guard.placeholders import PLACEHOLDER
from guard.policy import Policy, allow_list, default_policy
from protocol.contract import EmbedSpec, Job, Message, PromptSpec, ToolCall
from protocol.keys import guard_values_key
from tests.guard_secrets import AWS_KEY_ID, DB_PASSWORD, ENV_FILE, PRIVATE_KEY, VALUES, leaked
from tests.unit.generators import drained
from tests.unit.own_process import run_apart
from workers.guard_memory import TextMemory
from workers.model_output import NativeCall, Outcome, Thinking
from workers.secrets_guard import GuardConfig, Guards, SecretsInRequest

HOSTED = parse_entry("hosted", {"backend": "openai", "base_url": "https://api.example.com/v1",
                                "upstream_model": "m", "context_length": 4096})


def entry(**extra):
    """(A name of its own per policy: a worker remembers a model's policy by its name.)"""
    return parse_entry(f"m-{extra.get('guard')}", {"backend": "openai", "base_url": "https://api.example.com/v1",
                                                    "upstream_model": "m", "context_length": 4096, **extra})


@pytest.fixture
def guards():
    return Guards(fakeredis.FakeRedis(), b"office secret", GuardConfig(networks=(ip_network("10.0.0.0/8"),)))


def conversation(*more: Message) -> Job:
    """A turn whose tool result shows a project's .env, as Claude Code's Read returns it."""
    call = ToolCall(id="t1", name="Read", arguments=json.dumps({"file_path": "/srv/app/.env"}))
    return Job(id="j", model="hosted", usage_of="alice", messages=[
        Message(role="user", content="deploy it"), Message(role="assistant", tool_calls=[call]),
        Message(role="tool", tool_call_id="t1", content=ENV_FILE), *more])


def outbound(guards, job, model=HOSTED):
    guard = guards.for_job(job, model)
    return guard, guard.outbound(job)


def sent_text(job: Job) -> str:
    return job.model_dump_json()


@pytest.mark.parametrize("urls,policy", [
    (["https://api.openai.com/v1"], Policy.REDACT), (["http://10.1.2.3:8000/v1"], Policy.OFF),
    (["http://127.0.0.1:8000/v1"], Policy.OFF), (["http://localhost:11434"], Policy.OFF),
    (["http://[::1]:8000"], Policy.OFF), (["http://10.1.2.3/v1", "https://api.example.com"], Policy.REDACT),
    (["http://gpu1.office.lan:8000"], Policy.REDACT), ([], Policy.OFF)],
    ids=["hosted", "inside", "loopback", "localhost", "v6-loopback", "one-deployment-outside", "a-name", "local"])
def test_the_default_policy(urls, policy):
    assert default_policy(urls, (ip_network("10.0.0.0/8"),)) == policy


def test_a_keys_policy_is_taken_only_where_stricter(guards):
    job = Job(id="j", model="m")
    assert guards.policy(entry(), job.model_copy(update={"guard": "block"})) == Policy.BLOCK
    assert guards.policy(entry(guard="block"), job.model_copy(update={"guard": "log"})) == Policy.BLOCK
    assert guards.policy(entry(guard="off"), job) == Policy.OFF
    assert guards.policy(parse_entry("e", {"backend": "echo"}), job) == Policy.OFF


def test_a_redacted_turn_holds_none_of_the_secrets_and_the_next_turn_the_same_placeholders(guards):
    guard, sent = outbound(guards, conversation())
    assert leaked(sent_text(sent)) == []
    first = PLACEHOLDER.findall(sent.messages[2].content)
    assert len(first) == 4 and guard.report().kinds == {
        "aws-key": 1, "secret-assignment": 1, "password-in-url": 1, "private-key": 1}
    reply = Message(role="assistant", content="Done.")
    _, again = outbound(guards, conversation(reply, Message(role="user", content="and now?")))
    assert PLACEHOLDER.findall(again.messages[2].content) == first


def test_a_value_known_from_before_is_replaced_wherever_it_comes_again(guards):
    outbound(guards, conversation())
    compacted = Job(id="j2", model="hosted", usage_of="alice", messages=[
        Message(role="user", content=f"Summary: the db password is {DB_PASSWORD}; key {AWS_KEY_ID}.")])
    _, sent = outbound(guards, compacted)
    assert leaked(sent_text(sent)) == [] and len(PLACEHOLDER.findall(sent.messages[0].content)) == 2


def test_every_text_a_model_would_get_is_scanned(guards):
    call = ToolCall(id="c", name="write", arguments=json.dumps({"content": PRIVATE_KEY}))
    job = Job(id="j", model="hosted", usage_of="bob", messages=[
        Message(role="system", content=f"key {AWS_KEY_ID}"), Message(role="assistant", tool_calls=[call],
                                                                      thinking=f"use {AWS_KEY_ID}")])
    _, sent = outbound(guards, job)
    assert leaked(sent_text(sent)) == [] and json.loads(sent.messages[1].tool_calls[0].arguments)["content"]
    for other in (Job(id="p", model="hosted", usage_of="bob", prompt=PromptSpec(prompt=ENV_FILE, suffix=AWS_KEY_ID,
                                                                                 system=ENV_FILE)),
                  Job(id="e", model="hosted", usage_of="bob", embed=EmbedSpec(inputs=["x", ENV_FILE]))):
        assert leaked(sent_text(outbound(guards, other)[1])) == []


def pieces(*items):
    yield from items
    return Outcome("stop", 1, 1)


def test_the_reply_gets_the_values_back_even_cut_across_pieces(guards):
    guard, sent = outbound(guards, conversation())
    stand_in = PLACEHOLDER.findall(sent.messages[2].content)[0]  # the AWS key's
    cut = len(stand_in) // 2
    got, outcome = drained(guard.restored(pieces("Key: " + stand_in[:cut], stand_in[cut:] + ".",
                                                 Thinking("using " + stand_in, "sig"))))
    assert "".join(p for p in got if isinstance(p, str)) == f"Key: {AWS_KEY_ID}."
    assert got[-1] == Thinking(f"using {AWS_KEY_ID}", "sig") and outcome.completion_tokens == 1


def test_a_native_calls_arguments_get_the_values_back_as_json(guards):
    guard, sent = outbound(guards, conversation())
    key_stand_in = next(p for p in PLACEHOLDER.findall(sent.messages[2].content) if "PRIVATE" in p)
    call = NativeCall("Write", json.dumps({"file_path": "/srv/app/key", "content": key_stand_in}), "c1")
    got, _ = drained(guard.restored(pieces(call)))
    assert json.loads(got[0].arguments)["content"] == PRIVATE_KEY and got[0].id == "c1"


def test_only_the_persons_own_values_come_back(guards):
    alice_guard, alice_sent = outbound(guards, conversation())
    alices = PLACEHOLDER.findall(alice_sent.messages[2].content)
    bob_job = Job(id="b", model="hosted", usage_of="bob", messages=[Message(role="user", content=ENV_FILE)])
    bob_guard, bob_sent = outbound(guards, bob_job)
    assert set(PLACEHOLDER.findall(bob_sent.messages[0].content)).isdisjoint(alices)  # another person, others
    fished = " ".join(alices) + " SB_SECRET_AWS_KEY_0123456789ab"
    bob_only = Job(id="c", model="hosted", usage_of="bob", messages=[Message(role="user", content="hi")])
    later, _ = outbound(guards, bob_only)  # bob's values are known from before, alice's never
    got, _ = drained(later.restored(pieces(fished)))
    assert "".join(got) == fished


def test_a_block_names_each_kind_and_where_never_the_value(guards):
    with pytest.raises(SecretsInRequest) as refused:
        outbound(guards, conversation(), entry(guard="block"))
    message = refused.value.message
    assert refused.value.status == 400 and leaked(message) == []
    assert "aws-key in message 2 (tool result of Read, file /srv/app/.env)" in message
    assert "private-key" in message and "password-in-url" in message


def test_log_sends_it_as_it_came_and_counts_it(guards):
    job = conversation()
    guard, sent = outbound(guards, job, entry(guard="log"))
    assert sent == job and guard.report().action == "logged" and sum(guard.report().kinds.values()) == 4
    assert guards.redis.keys(guard_values_key("*")) == []  # nothing to put back: no value kept


def test_each_text_is_scanned_once_and_its_findings_counted_once(guards, monkeypatch):
    scanned = []
    real = secrets_guard._detect
    monkeypatch.setattr(secrets_guard, "_detect", lambda text, allowed: scanned.append(text) or real(text, allowed))
    guard, _ = outbound(guards, conversation())
    assert len(scanned) == 3 and sum(guard.report().first_seen.values()) == 4
    guards.texts.clear()  # another worker process: the findings come from Redis
    guard, _ = outbound(guards, conversation(Message(role="user", content="more")))
    assert len(scanned) == 4 and not guard.report().first_seen and sum(guard.report().kinds.values()) == 4


def test_the_allow_list_leaves_its_values_alone():
    allowed = allow_list(["# fixtures", AWS_KEY_ID, r"re:Vq7Lm\w+"])
    guards = Guards(fakeredis.FakeRedis(), b"s", GuardConfig(allowed=allowed))
    _, sent = outbound(guards, conversation())
    assert AWS_KEY_ID in sent.messages[2].content and DB_PASSWORD in sent.messages[2].content
    assert PRIVATE_KEY not in sent.messages[2].content


def test_values_sealed_in_redis_are_not_readable(guards):
    outbound(guards, conversation())
    stored = b"".join(k + v for k, v in guards.redis.hgetall(guard_values_key("alice")).items())
    assert leaked(stored.decode()) == [] and all(v.encode() not in stored for v in VALUES)
    assert all(not leaked(v.decode()) for k in guards.redis.keys("*scanned*") for v in [guards.redis.get(k)])


def test_a_secret_read_raw_and_written_as_json_is_one_placeholder(guards):
    """Claude Code's next turn carries the key as the Bash tool showed it and in its Write call's JSON."""
    write = ToolCall(id="w", name="Write", arguments=json.dumps({"file_path": "/a/.env", "content": ENV_FILE}))
    job = conversation(Message(role="assistant", tool_calls=[write]), Message(role="tool", tool_call_id="w",
                                                                            content="File created"))
    _, sent = outbound(guards, job)
    assert leaked(sent_text(sent)) == []
    assert set(PLACEHOLDER.findall(sent.messages[3].tool_calls[0].arguments)) == set(
        PLACEHOLDER.findall(sent.messages[2].content))


def test_a_turn_all_scanned_here_reads_its_persons_values_again_only_after_a_while(guards, monkeypatch):
    """An agent's tool loop: its next turn, every text scanned by this process, needs no round trip for
    the person's values; a value another worker learned meanwhile is read within VALUES_FRESH_SECONDS."""
    clock = [1000.0]
    monkeypatch.setattr(secrets_guard.time, "monotonic", lambda: clock[0])
    outbound(guards, conversation())
    elsewhere = Guards(guards.redis, b"office secret")  # another worker process
    _, sent = outbound(elsewhere, Job(id="x", model="hosted", usage_of="alice", messages=[
        Message(role="user", content="PGPASSWORD='Zq8Wv3Lx5Rt9Kp2N'")]))
    assert "Zq8Wv3Lx5Rt9Kp2N" not in sent_text(sent)
    prose = conversation(Message(role="user", content="it is Zq8Wv3Lx5Rt9Kp2N, isn't it?"))
    outbound(guards, prose)  # (scans the new message here, reading the values: knows it)
    reads = []
    monkeypatch.setattr(guards.redis, "pipeline", lambda **kw: reads.append(1) or fakeredis.FakeRedis.pipeline(
        elsewhere.redis, **kw))
    _, again = outbound(guards, prose)
    assert reads == [] and "Zq8Wv3Lx5Rt9Kp2N" not in sent_text(again)
    clock[0] += secrets_guard.VALUES_FRESH_SECONDS + 0.1
    outbound(guards, prose)
    assert reads == [1]


def test_a_worker_that_remembers_almost_nothing_still_redacts_everything(guards):
    """(Its memory full: each text it puts in pushes the one before out, as other jobs' turns would.)"""
    guards.texts = TextMemory(most=10)
    for _ in range(2):
        guard, sent = outbound(guards, conversation())
        assert leaked(sent_text(sent)) == [] and sum(guard.report().kinds.values()) == 4



def test_a_worker_whose_models_are_unguarded_never_loads_the_detectors():
    """(detect-secrets is some 20 MB a process: `make run`'s local models need none of it.)"""
    found = run_apart(
        "import json, sys, workers.tasks, workers.secrets_guard as g, fakeredis\n"
        "from catalog.registry import parse_entry\nfrom protocol.contract import Job\n"
        "job = Job(id='j', model='e', usage_of='a')\n"
        "g.Guards(fakeredis.FakeRedis(), b's').for_job(job, parse_entry('e', {'backend': 'echo'})).outbound(job)\n"
        "print(json.dumps({'detectors': 'detect_secrets' in sys.modules}))")
    assert found == {"detectors": False}
