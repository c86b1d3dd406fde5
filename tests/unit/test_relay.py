"""app.relay on a real Redis, in a gevent-patched process of its own."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("relay_scenarios.py")


@pytest.mark.parametrize("scenario", [
    "delivers_each_jobs_events_to_its_stream_only", "hears_nothing_meant_for_another_web_process",
    "shares_one_connection_with_no_subscription_per_stream", "ends_every_stream_when_redis_drops_it_and_recovers"])
def test_relay(scenario, redis_url, clean_redis):
    result = subprocess.run([sys.executable, str(SCRIPT), scenario, redis_url], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stdout + result.stderr
