"""scripts/bench.py's `side_by_side`: the smoke test's sections, several at a time."""
from __future__ import annotations

import threading

import pytest

from scripts import bench


def test_every_part_runs_and_answers_under_its_name_longest_first():
    order, lock = [], threading.Lock()

    def part(name):
        def run():
            with lock:
                order.append(name)
            return {"name": name}
        return run
    found = bench.side_by_side({name: part(name) for name in ("a", "b", "c", "d")}, 1, first=("c", "zz"))
    assert found == {name: {"name": name} for name in ("c", "a", "b", "d")}
    assert order == ["c", "a", "b", "d"]


def test_they_really_run_at_once():
    both = threading.Barrier(2, timeout=10)  # each part waits for the other: one lane would never pass
    found = bench.side_by_side({"a": lambda: both.wait() >= 0, "b": lambda: both.wait() >= 0}, 2)
    assert found == {"a": True, "b": True}


def test_the_first_failure_stops_what_was_started_and_is_raised(monkeypatch):
    stopped, release = [], threading.Event()
    monkeypatch.setattr(bench, "stop_all", lambda: (stopped.append(True), release.set()))

    def fails():
        raise RuntimeError("section 9 broke")

    def waits_for_its_processes_to_stop():
        assert release.wait(10)  # (as a section's requests fail once its stack is stopped)
        return {}
    with pytest.raises(RuntimeError, match="section 9 broke"):
        bench.side_by_side({"long": waits_for_its_processes_to_stop, "broken": fails}, 2)
    assert stopped == [True]
