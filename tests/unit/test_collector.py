"""settings/collector.py: the garbage collector's tuning once a process started."""
import gc

import pytest

from settings import Settings
from settings.collector import tune_garbage_collector


@pytest.fixture
def collector_restored():
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


def test_start_up_is_frozen_and_the_young_threshold_raised(collector_restored):
    _, older, oldest = gc.get_threshold()
    survivor = [object()]  # alive at start-up: frozen with the rest
    tune_garbage_collector(12345)
    assert gc.get_threshold() == (12345, older, oldest)
    assert gc.get_freeze_count() > 0
    assert all(tracked is not survivor for tracked in gc.get_objects())  # full passes no longer walk it


def test_cyclic_garbage_is_still_collected(collector_restored):
    tune_garbage_collector(12345)

    class Node:
        pass
    node = Node()
    node.self = node
    del node
    assert gc.collect() >= 1


def test_zero_keeps_pythons_defaults(collector_restored):
    gc.unfreeze()
    before = gc.get_threshold()
    tune_garbage_collector(0)
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_the_setting_defaults_to_ten_thousand_and_refuses_negatives(monkeypatch):
    monkeypatch.delenv("SWITCHBOARD_GC_THRESHOLD", raising=False)
    assert Settings().gc_threshold == 10000
    monkeypatch.setenv("SWITCHBOARD_GC_THRESHOLD", "-1")
    with pytest.raises(Exception, match="SWITCHBOARD_GC_THRESHOLD|gc_threshold"):
        Settings()
