"""The API dialects, as pure data conversions (no Flask, Redis, Celery or
HTTP client: checked by import-linter). Per dialect, side by side:

- `<dialect>_schemas.py`: the pydantic wire models of its requests
- `<dialect>.py`: its mappings in both directions: a client's request into
  the internal Job (web side), and a Job into a request to an upstream server
  of that dialect (worker side); a new sampling field is one change here
- `<dialect>_writer.py`: the writers that turn a job's events into the
  dialect's reply objects (streamed chunks, or one whole reply)

Both processes import this package; it imports only `protocol`.
"""
