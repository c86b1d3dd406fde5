"""The guard fuzzed with hypothesis (workers/secrets_guard.py on a fake
Redis): arbitrary text with the secrets among it is sent without them and
comes back whole, however the reply is cut into pieces; arbitrary text
never breaks the scan; and placeholders a person forged, whether seen in a
colleague's traffic, relabelled or made up, are never restored to anyone
else's value."""
from __future__ import annotations

import json

import fakeredis
from hypothesis import HealthCheck, given, settings, strategies as st

from guard.placeholders import PLACEHOLDER, PREFIX
from protocol.contract import Job, Message, ToolCall
from tests.guard_secrets import ENV_FILE, leaked
from tests.unit.generators import drained
from tests.unit.test_secrets_guard import HOSTED, pieces
from workers.model_output import NativeCall
from workers.secrets_guard import Guards

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# The .env's entries (the private key's spans lines).
SECRET_ENTRIES = [line + "\n" for line in ENV_FILE.split("\n") if line and not line.startswith(("b3B", "QyN", "---"))]
SECRET_ENTRIES[-1] = ENV_FILE[ENV_FILE.index("DEPLOY_KEY"):]
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=200).filter(lambda t: PREFIX not in t)
# Lines of prose or code, and the .env's entries, in any order, each entry on lines of its own.
DOCUMENT = st.lists(st.one_of(TEXT.map(lambda t: t.replace("\n", " ") + "\n"), st.sampled_from(SECRET_ENTRIES)),
                    max_size=12).map("".join)


def guards() -> Guards:
    return Guards(fakeredis.FakeRedis(), b"office secret")


def job_of(person: str, text: str, arguments: str = "{}") -> Job:
    return Job(id="j", model="hosted", usage_of=person, messages=[
        Message(role="assistant", tool_calls=[ToolCall(id="c", name="write", arguments=arguments)]),
        Message(role="tool", tool_call_id="c", content=text)])


def cut(text: str, at: list[int]) -> list[str]:
    marks = sorted({0, len(text), *(min(a, len(text)) for a in at)})
    return [text[a:b] for a, b in zip(marks, marks[1:])]


@FUZZ
@given(document=DOCUMENT, cuts=st.lists(st.integers(0, 3000), max_size=8))
def test_a_document_goes_without_its_secrets_and_comes_back_whole(document, cuts):
    guard = guards().for_job(job_of("alice", document), HOSTED)
    sent = guard.outbound(job_of("alice", document, json.dumps({"content": document})))
    assert leaked(sent.model_dump_json()) == []
    reply = sent.messages[1].content  # a model repeating the result, cut anywhere
    got, _ = drained(guard.restored(pieces(*cut(reply, cuts))))
    assert "".join(got) == document
    call, _ = drained(guard.restored(pieces(NativeCall("write", sent.messages[0].tool_calls[0].arguments))))
    assert json.loads(call[0].arguments)["content"] == document


@FUZZ
@given(text=st.text(max_size=400), arguments=st.text(max_size=100))
def test_arbitrary_text_never_breaks_the_scan(text, arguments):
    guard = guards().for_job(job_of("alice", text), HOSTED)
    sent = guard.outbound(job_of("alice", text, arguments))
    got, _ = drained(guard.restored(pieces(text, NativeCall("x", arguments))))
    assert len(sent.messages) == 2 and got


HEX = st.text("0123456789abcdef", min_size=12, max_size=12)
KIND = st.sampled_from(["AWS_KEY", "PRIVATE_KEY", "PASSWORD_IN_URL", "SECRET_ASSIGNMENT", "PASSWORD", "JWT"])


@FUZZ
@given(data=st.data())
def test_forged_placeholders_never_bring_back_another_persons_secret(data):
    shared = guards()
    alice = shared.for_job(job_of("alice", ENV_FILE), HOSTED)
    seen = PLACEHOLDER.findall(alice.outbound(job_of("alice", ENV_FILE)).model_dump_json())
    digits = [p[-12:] for p in seen]
    forged = st.one_of(st.sampled_from(seen), st.builds(lambda k, d: f"{PREFIX}{k}_{d}", KIND, st.sampled_from(digits)),
                       st.builds(lambda k, d: f"{PREFIX}{k}_{d}", KIND, HEX), TEXT)
    parts = data.draw(st.lists(forged, min_size=1, max_size=10))
    reply = " ".join(parts)
    bob = shared.for_job(job_of("bob", "hello"), HOSTED)
    bob.outbound(job_of("bob", data.draw(st.sampled_from(["hello", ENV_FILE]))))  # bob may hold the same secrets
    got, _ = drained(bob.restored(pieces(*cut(reply, data.draw(st.lists(st.integers(0, 500), max_size=5))))))
    assert "".join(got) == reply  # left as they came, even where bob holds the same secrets himself
