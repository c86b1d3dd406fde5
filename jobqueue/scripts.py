"""The job queue's Lua scripts (jobqueue/lua), one transition each."""
from __future__ import annotations

from pathlib import Path

from protocol.scripts import ScriptBook

SCRIPTS = ScriptBook(Path(__file__).with_name("lua"))
run_script, queue_script, execute = SCRIPTS.run, SCRIPTS.queue, SCRIPTS.execute
