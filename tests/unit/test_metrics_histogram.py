"""A histogram in Redis: each observation is counted in its own bucket (two
commands), and read back cumulative, as Prometheus expects."""
from __future__ import annotations

from telemetry import metrics
from protocol.keys import ttft_key


def test_observations_are_stored_once_and_read_cumulative(clean_redis):
    for seconds in (0.004, 0.02, 0.02, 0.7, 99.0):
        metrics.count_job(clean_redis, "m", "stop", 1, seconds)
    assert clean_redis.hlen(ttft_key("m")) == 5  # four buckets touched, and the sum
    got = metrics.ttft_histogram(clean_redis, "m")
    assert got["0.005"] == 1 and got["0.01"] == 1 and got["0.025"] == 3 and got["0.5"] == 3 and got["1.0"] == 4
    assert got["60.0"] == 4 and got["+Inf"] == 5 and abs(got["sum"] - 99.744) < 1e-9


def test_nothing_observed_reads_empty(clean_redis):
    assert metrics.ttft_histogram(clean_redis, "none") == {}
