"""A job's state in its record (jobqueue/records.py). A waiting job has no
record yet: its take writes the first one, RUNNING. Why it finished is a
protocol.events.FinishReason."""
from __future__ import annotations

from enum import StrEnum


class JobState(StrEnum):
    RUNNING = "running"  # a worker took it (the take starts it)
    FINISHED = "finished"  # its final event is published, or it left the queue unrun
