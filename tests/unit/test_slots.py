"""A worker's slots on a real Redis: models that run a bounded number of
jobs per worker tracked as having room or full (and published for other workers), affinity remembered after a job
of such a model, tickets sent for a person's jobs skipped elsewhere for their
limit, and the keys file's weights."""
from __future__ import annotations

import time
import uuid

import pytest

from catalog.registry import Registry, parse_entry
from identity.keys import load_keys
from jobqueue import affinity, fairqueue
from jobqueue.fairqueue import Asker, Placement, Ticketing
from protocol import keys
from protocol.contract import Job, Message
from workers.slots import Slots


def registry(parallel: int = 1, spare: int = 0) -> Registry:
    return Registry({"smol": parse_entry("smol", {"backend": "llamacpp", "parallel": parallel, "spare": spare}),
                     "echo": parse_entry("echo", {"backend": "echo"})})


def queue(redis, web, person, model, pool="local", limit=16, serial=True, ticket=False, cache_key="",
          background=False) -> str:
    job = Job(id=uuid.uuid4().hex, model=model, messages=[Message(role="user", content="hi")], web_id=web,
              expires_at=time.time() + 60, cache_key=cache_key, background=background)
    fairqueue.push(redis, job, Asker(person, limit), Placement(pool, serial=serial),
                   tickets=Ticketing.ASK if ticket else Ticketing.NONE)
    return job.id


def slots(redis, sent, parallel: int = 1, spare: int = 0) -> Slots:
    own = Slots(redis, "w1", registry(parallel, spare), lambda *woken: sent.append(woken))
    own.start_tracking({"local"})
    return own


def test_a_one_at_a_time_model_runs_one_job_per_worker_and_is_published_idle_again(clean_redis, web):
    sent = []
    own = slots(clean_redis, sent)
    assert clean_redis.zscore(keys.FAIR_FREE_PREFIX + "smol", "w1") is not None  # idle at start
    queue(clean_redis, web, "alice", "smol")
    queue(clean_redis, web, "bob", "smol")
    first = own.take("local")
    assert first.person == "alice" and clean_redis.zscore(keys.FAIR_FREE_PREFIX + "smol", "w1") is None
    assert own.take("local").job is None  # the model is busy here; no other worker is idle
    own.finish("local", first)
    assert clean_redis.zscore(keys.FAIR_FREE_PREFIX + "smol", "w1") is not None
    assert clean_redis.get(keys.affinity_key("smol", "alice")) == b"w1"
    assert own.take("local").person == "bob"


def test_a_model_decoding_several_jobs_at_once_takes_as_many_as_it_has_sequences(clean_redis, web):
    own = slots(clean_redis, [], parallel=2)
    for person in ("alice", "bob", "carol"):
        queue(clean_redis, web, person, "smol")
    first = own.take("local")
    assert clean_redis.zscore(keys.FAIR_FREE_PREFIX + "smol", "w1") is not None  # a sequence is still free
    second = own.take("local")
    assert {first.person, second.person} == {"alice", "bob"}
    assert clean_redis.zscore(keys.FAIR_FREE_PREFIX + "smol", "w1") is None  # full
    assert own.take("local").job is None
    own.finish("local", second)
    assert clean_redis.zscore(keys.FAIR_FREE_PREFIX + "smol", "w1") is not None
    assert own.take("local").person == "carol"


def test_a_person_running_jobs_here_leaves_the_spare_sequence_to_a_colleague(clean_redis, web):
    """Two sequences and a spare: alice's three long jobs, queued while she
    is alone, fill the two; bob's turn takes the spare at once, and his next
    when his first ends; one free sequence is always left to someone running
    nothing, so her third job runs once two are free."""
    own = slots(clean_redis, [], parallel=2, spare=1)
    for _ in range(3):
        queue(clean_redis, web, "alice", "smol")
    longs = [own.take("local"), own.take("local")]
    assert [t.person for t in longs] == ["alice", "alice"] and own.take("local").job is None
    assert clean_redis.zscore(keys.FAIR_FREE_PREFIX + "smol", "w1") is not None  # the spare: free, for others
    queue(clean_redis, web, "bob", "smol")
    turn = own.take("local")
    assert turn.person == "bob" and clean_redis.zscore(keys.FAIR_FREE_PREFIX + "smol", "w1") is None
    queue(clean_redis, web, "bob", "smol")
    own.finish("local", turn)
    second = own.take("local")
    assert second.person == "bob"  # alice holds two: the free one is the spare
    own.finish("local", longs[0])
    assert own.take("local").job is None  # one free: kept for someone running nothing
    own.finish("local", second)
    assert own.take("local").person == "alice"


def test_a_worker_with_fewer_threads_than_sequences_says_so(clean_redis, caplog):
    own = slots(clean_redis, [], parallel=4, spare=1)
    own.check_threads(4)
    assert "smol has 5 sequences (parallel + spare) but this worker runs 4 jobs at once" in caplog.text
    caplog.clear()
    own.check_threads(5)
    assert caplog.text == ""


def test_background_work_leaves_the_last_sequence_for_a_turn(clean_redis, web):
    own = slots(clean_redis, [], parallel=2)
    for _ in range(2):
        queue(clean_redis, web, "alice", "smol", background=True)
    assert own.take("local").person == "alice"  # two free: one for it
    assert own.take("local").job is None  # the last free sequence waits for a turn
    queue(clean_redis, web, "bob", "smol")
    assert own.take("local").person == "bob"


def test_a_person_holding_a_sequence_leaves_the_last_one_to_others_at_work(clean_redis, web):
    """Bob was served a moment ago (he is at work between turns): alice's
    jobs take two of three sequences and leave him the last. (Alone, a
    person takes every sequence: the test above.)"""
    own = slots(clean_redis, [], parallel=3)
    queue(clean_redis, web, "bob", "smol")
    own.finish("local", own.take("local"))
    for _ in range(3):
        queue(clean_redis, web, "alice", "smol")
    assert own.take("local").person == own.take("local").person == "alice"
    assert own.take("local").job is None
    queue(clean_redis, web, "bob", "smol")
    assert own.take("local").person == "bob"


def test_a_job_with_a_cache_key_leaves_its_affinity_to_the_key_not_the_person(clean_redis, web):
    own = slots(clean_redis, [])
    queue(clean_redis, web, "alice", "smol", cache_key="shared-system-prompt")
    own.finish("local", own.take("local"))
    keyed = Job(id="x", model="smol", cache_key="shared-system-prompt")
    assert affinity.held_by_worker(keyed, "alice") == [affinity.affinity_of(keyed, "alice").split("\x1f")[0]]
    assert clean_redis.get(keys.affinity_key("smol", affinity.held_by_worker(keyed, "alice")[0])) == b"w1"
    assert clean_redis.get(keys.affinity_key("smol", "alice")) is None


def test_a_job_skipped_elsewhere_for_its_persons_limit_gets_a_ticket_when_a_slot_frees(clean_redis, web):
    sent = []
    own = slots(clean_redis, sent)
    queue(clean_redis, web, "alice", "echo", pool="local", limit=1, serial=False)
    running = own.take("local")
    queue(clean_redis, web, "alice", "echo", pool="upstream", limit=1, serial=False)
    assert fairqueue.take(clean_redis, "upstream", "w2").job is None  # alice is at her limit
    own.finish("local", running)
    assert sent == [("upstream", "", "")]


@pytest.mark.parametrize("model", ["echo", "smol"], ids=["untracked-in-one-round-trip", "one-at-a-time-tracked"])
def test_a_slot_that_finishes_takes_the_next_job(clean_redis, web, model):
    sent = []
    own = Slots(clean_redis, "w1", Registry({model: registry().get(model)}), lambda *woken: sent.append(woken))
    own.start_tracking({"local"})
    queue(clean_redis, web, "alice", model, serial=model == "smol")
    queue(clean_redis, web, "bob", model, serial=model == "smol")
    first = own.take("local")
    following = own.finish("local", first, take_next=True)
    assert (first.person, following.person) == ("alice", "bob")
    assert own.finish("local", following, take_next=True).job is None
    assert own.finish("local", own.take("local")).job is None and sent == []


def test_keys_file_weights(tmp_path):
    path = tmp_path / "keys.toml"
    path.write_text('[keys.batch]\nsha256 = "00"\nweight = 0.5\n\n[keys.ann]\nsha256 = "11"\n')
    ring = load_keys(path, None)
    assert [k.weight for k in ring._keys] == [0.5, 1.0]
    path.write_text('[keys.bad]\nsha256 = "00"\nweight = 0\n')
    with pytest.raises(ValueError, match="keys.bad.weight must be a number above 0, not 0"):
        load_keys(path, None)


def test_a_worker_of_another_pool_is_never_published_idle_for_a_local_model(clean_redis, web):
    upstream = Slots(clean_redis, "w-up", registry(), lambda *ticket: None)
    upstream.start_tracking({"upstream"})
    assert clean_redis.zscore(keys.FAIR_FREE_PREFIX + "smol", "w-up") is None
