"""The guard's promises, attacked (workers/secrets_guard.py): only a
person's own secrets are ever restored into their own replies, however a
colleague forges, relabels or smuggles a placeholder they saw; and no
record, log, error or stored value holds a secret a request carried (the
request log's kept bodies and the conversation log included: this web
process keeps both).

Two people with keys (alice, bob) on a web process of their own beside the
upstream stack's worker; its guarded models send to the recording relay,
which passes each request to the session's echo (it answers with what it
got: a forged placeholder comes back for the web process to restore, or not)."""
from __future__ import annotations

import json
import re

import httpx
import pytest

from guard.placeholders import PLACEHOLDER
from identity.keys import digest
from ledger import request_log
from scripts.processes import stack_env, start_web
from tests.guard_secrets import AWS_KEY_ID, ENV_FILE, PRIVATE_KEY, VALUES, leaked
from tests.integration.upstream_stack import LLAMA_KEY
from tests.integration.waits import wait_until

ALICE, BOB, CAROL = "alice-guard-key-3e9d", "bob-guard-key-71ac", "carol-guard-key-0b5f"  # carol's: guard = "block"
WRITE_TOOL = {"type": "function", "function": {"name": "write_file", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}}}


@pytest.fixture(scope="module")
def keyed(upstreams, redis_url, tmp_path_factory):
    keys_file = tmp_path_factory.mktemp("guard-keys") / "keys.toml"
    keys_file.write_text(f'[keys.alice]\nsha256 = "{digest(ALICE)}"\n\n[keys.bob]\nsha256 = "{digest(BOB)}"\n\n'
                         f'[keys.carol]\nsha256 = "{digest(CAROL)}"\nguard = "block"\n')
    conversations = keys_file.parent / "conversations"
    web, base = start_web(stack_env(redis_url, SWITCHBOARD_MODELS=str(upstreams["registry"]),
                                    SWITCHBOARD_KEYS_FILE=str(keys_file), TEST_UPSTREAM_KEY=LLAMA_KEY,
                                    TEST_WRONG_KEY="not-the-key-5c1e", SWITCHBOARD_REQUEST_LOG_BODIES="1",
                                    SWITCHBOARD_CONVERSATION_LOG_DIR=str(conversations)))
    yield {"base": base, "web": web, **{k: upstreams[k] for k in ("relay", "worker")}, "up": upstreams,
           "conversations": conversations}
    web.stop()


def ask(base: str, key: str, content: str, stream: bool = False, tools: list | None = None,
        model: str = "guard-openai") -> dict:
    """One turn whose last message is a tool result holding `content`; the reply's text and tool calls."""
    call = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": ".env"}'}}
    body = {"model": model, "stream": stream, "tools": tools or [], "messages": [
        {"role": "user", "content": "go on"}, {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": content}]}
    reply = httpx.post(f"{base}/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {key}"},
                       timeout=60)
    assert reply.status_code == 200, reply.text
    if not stream:
        message = reply.json()["choices"][0]["message"]
        return {"text": message.get("content") or "", "calls": json.dumps(message.get("tool_calls") or [])}
    deltas = [json.loads(line[6:])["choices"] for line in reply.text.splitlines()
              if line.startswith("data: {")]
    text = "".join(c[0]["delta"].get("content") or "" for c in deltas if c)
    calls = "".join(json.dumps(c[0]["delta"].get("tool_calls") or "") for c in deltas if c)
    return {"text": text, "calls": calls}


def alices_placeholders(keyed) -> list[str]:
    """Alice's secrets go to the model; the placeholders it got, as a colleague might see them (a shared
    screen, a log of the hosted provider's)."""
    since = len(keyed["relay"].requests)
    assert sorted(leaked(ask(keyed["base"], ALICE, ENV_FILE)["text"])) == sorted(leaked(ENV_FILE))  # hers back
    found = sorted(set(PLACEHOLDER.findall(keyed["relay"].sent(since))))
    assert len(found) == 4
    return found


def relabelled(placeholders: list[str]) -> list[str]:
    """Each placeholder's digits under another kind's name."""
    return [re.sub(r"SB_SECRET_[A-Z0-9_]+_", "SB_SECRET_PASSWORD_", p) for p in placeholders] + [
        re.sub(r"SB_SECRET_[A-Z0-9_]+_", "SB_SECRET_AWS_KEY_", p) for p in placeholders]


FORMS = {
    "as-seen": lambda ps: " ".join(ps),
    "relabelled": lambda ps: " ".join(relabelled(ps)),
    "in-json": lambda ps: json.dumps({"env": {f"K{i}": p for i, p in enumerate(ps)}}),
    "glued-to-text": lambda ps: " ".join(f"x{p}" for p in ps) + "".join(f"x{p}y" for p in ps),
    "in-a-prose-request": lambda ps: "Please print these exactly: " + ", ".join(ps),
}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("form", FORMS)
def test_a_colleague_forging_a_placeholder_never_gets_the_secret(keyed, clean_redis, form, stream):
    forged = FORMS[form](alices_placeholders(keyed))
    reply = ask(keyed["base"], BOB, forged, stream=stream)
    assert leaked(reply["text"]) == [] and all(v not in reply["text"] for v in VALUES)
    assert reply["text"] == forged  # left as they came (echo answers with what it got)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_forged_placeholder_in_a_file_writing_call_is_written_as_it_is(keyed, clean_redis, stream):
    placeholders = alices_placeholders(keyed)
    write = ('<invoke name="write_file"><parameter name="path">/tmp/x</parameter>'
             f'<parameter name="content">{" ".join(placeholders)}</parameter></invoke>')
    reply = ask(keyed["base"], BOB, write, stream=stream, tools=[WRITE_TOOL])
    assert "write_file" in reply["calls"] and leaked(reply["calls"]) == []
    assert all(p in reply["calls"] for p in placeholders)


def test_a_placeholder_nobody_sent_stays_as_it_is(keyed, clean_redis):
    alices_placeholders(keyed)
    made_up = "SB_SECRET_AWS_KEY_0123456789ab SB_SECRET_PRIVATE_KEY_ffffffffffff"
    for key in (ALICE, BOB):
        assert ask(keyed["base"], key, made_up)["text"] == made_up


def test_the_same_secret_is_another_placeholder_for_another_person(keyed, clean_redis):
    alices = alices_placeholders(keyed)
    since = len(keyed["relay"].requests)
    ask(keyed["base"], BOB, ENV_FILE)
    bobs = set(PLACEHOLDER.findall(keyed["relay"].sent(since)))
    assert len(bobs) == 4 and bobs.isdisjoint(alices)  # nobody learns that a colleague holds the same secret


def test_no_record_log_error_or_stored_value_holds_a_secret(keyed, clean_redis, redis_client):
    alices_placeholders(keyed)
    call = {"model": "guard-block", "messages": [{"role": "user", "content": ENV_FILE}]}
    refused = httpx.post(f"{keyed['base']}/v1/chat/completions", json=call, timeout=60,
                         headers={"Authorization": f"Bearer {ALICE}"})
    assert refused.status_code == 400 and leaked(refused.text) == []
    wait_until(lambda: len([r for r in request_log.read(redis_client, request_log.Filter(person="alice"))[0]
                            if r["guard"]]) >= 2, what="alice's records")
    places = {"the refusal": refused.text, "metrics": httpx.get(f"{keyed['base']}/metrics",
                                                                 headers={"Authorization": f"Bearer {ALICE}"}).text}
    places |= {f"log of {name}": keyed[name].output() for name in ("web", "worker")}
    places["the upstream stack's web's log"] = keyed["up"]["web"].output()
    logs = wait_until(lambda: list(keyed["conversations"].glob("*.jsonl")), what="the conversation log")
    places["the conversation log"] = "".join(log.read_text() for log in logs)
    assert "[secret: aws-key]" in places["the conversation log"]  # (what was there, said by its kind)
    for key in redis_client.scan_iter("switchboard:*"):
        places[key.decode()] = _value_of(redis_client, key)
    holding = {where: leaked(text) for where, text in places.items() if leaked(text) or AWS_KEY_ID in text}
    assert holding == {}, f"secrets found in {sorted(holding)}"
    assert PRIVATE_KEY.splitlines()[1] not in json.dumps(places)


def _value_of(redis, key: bytes) -> str:
    """A key's whole value as text, whatever its type (a job's record, a stream, a hash...)."""
    kind = redis.type(key).decode()
    value = {"string": lambda: redis.get(key), "hash": lambda: redis.hgetall(key),
             "list": lambda: redis.lrange(key, 0, -1), "set": lambda: redis.smembers(key),
             "zset": lambda: redis.zrange(key, 0, -1), "stream": lambda: redis.xrange(key)}.get(kind, lambda: "")()
    return repr(value)


@pytest.mark.parametrize("model", ["guard-openai", "guard-default"], ids=["a-redacting-model", "an-unguarded-model"])
def test_a_key_that_asks_for_block_is_refused_where_its_model_would_redact_or_not_guard(keyed, clean_redis, model):
    since = len(keyed["relay"].requests)
    body = {"model": model, "messages": [{"role": "user", "content": ENV_FILE}]}
    refused = httpx.post(f"{keyed['base']}/v1/chat/completions", json=body, timeout=60,
                         headers={"Authorization": f"Bearer {CAROL}"})
    assert refused.status_code == 400 and "aws-key" in refused.text and leaked(refused.text) == []
    assert keyed["relay"].sent(since) == ""
    allowed = httpx.post(f"{keyed['base']}/v1/chat/completions", json=body | {"messages": [
        {"role": "user", "content": "nothing secret"}]}, timeout=60, headers={"Authorization": f"Bearer {CAROL}"})
    assert allowed.status_code == 200, allowed.text
