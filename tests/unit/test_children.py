"""scripts/children.py: a launcher's stop signal that arrives between
starting a child and tracking it waits for the tracking, so the child is
stopped with the rest instead of left running."""
from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from scripts.processes import ROOT

LAUNCHER = """
import os, signal, sys
from scripts.children import starting, stop_on_signals, track

class Child:
    def stop(self):
        print("child stopped", flush=True)

stop_on_signals()
with starting():
    os.kill(os.getpid(), signal.{sig})  # as a supervisor's signal would, the moment the child shows
    print("still starting", flush=True)
    track(Child())
print("never here", flush=True)
"""


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT", "SIGHUP"])
def test_a_stop_signal_while_a_child_starts_stops_it_once_tracked(sig):
    done = subprocess.run([sys.executable, "-c", LAUNCHER.replace("{sig}", sig)], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.stdout.splitlines() == ["still starting", "child stopped"], done.stderr
    assert done.returncode == 128 + getattr(signal, sig)
