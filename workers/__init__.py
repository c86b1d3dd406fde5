"""Switchboard's worker process (Celery): tasks.py takes a job off the
queue, runner.py runs it on a backend (backends/), emulating tool calls
(toolcalls/) and publishing its events (publisher.py). It imports
`protocol`, `catalog`, `dialects` and `settings`, never `app`."""
