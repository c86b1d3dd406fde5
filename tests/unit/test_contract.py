"""The job and event contract across versions: during a rolling deploy a
newer web process talks to an older worker and the reverse."""
from __future__ import annotations

import pytest
from pydantic import ValidationError

from protocol.contract import Job
from protocol.events import DoneEvent, TextEvent, UnknownEvent, decode_event, encode_event

CURRENT = Job(id="j1", model="echo").model_dump(mode="json")


def test_a_newer_job_is_read_by_an_older_reader_ignoring_what_it_does_not_know():
    # (server_tools and images, once examples of such fields, have since joined the contract)
    newer = CURRENT | {"priority": 3, "audio_tools": ["time"],
                       "options": CURRENT["options"] | {"mirostat": 2},
                       "messages": [{"role": "user", "content": "hi", "audio": ["aGk="]}]}
    job = Job.model_validate(newer)
    assert (job.id, job.messages[0].content, job.options.max_tokens) == ("j1", "hi", None)
    assert not hasattr(job, "priority")


def test_an_older_job_is_read_by_a_newer_reader_with_defaults():
    older = {"id": "j2", "model": "echo", "messages": [{"role": "user", "content": "hi"}]}
    job = Job.model_validate(older)
    assert job.version == 1 and job.tool_choice.mode == "auto" and job.options.stop == []


def test_values_are_still_validated():
    with pytest.raises(ValidationError):
        Job.model_validate(CURRENT | {"messages": [{"role": "wizard", "content": "x"}]})


def test_an_event_of_a_type_this_reader_does_not_know_is_decoded_as_unknown():
    assert decode_event(b'{"type":"tool_activity","server":"time","seconds":0.2}') == UnknownEvent(type="tool_activity")
    assert decode_event(b'{"type":"text","text":"a","channel":"main"}') == TextEvent(text="a")


def test_a_malformed_known_event_is_an_error():
    with pytest.raises(ValidationError):
        decode_event(b'{"type":"text"}')
    with pytest.raises(ValidationError):
        decode_event(b'{"text":"no type"}')


def test_events_round_trip():
    done = DoneEvent(reason="stop")
    assert decode_event(encode_event(done)) == done
