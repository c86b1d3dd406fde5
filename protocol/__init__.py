"""The contract between Switchboard's two processes: the web front end
(`app/`) and the Celery workers (`workers/`) never import each other; both
stand on this package.

- contract.py: the job that travels between them, and the compatibility
  policy (tolerant of fields a newer version adds, and versioned)
- events.py: the events a job's worker sends its web process, and their codec
- keys.py: EVERY Redis key and pub/sub channel name (those of the job queue,
  the operator's records and the metrics included)
- presence.py: what the processes send each other about themselves (events
  on a reply channel, web leases, worker presence, loaded models)
- queue.py: queue names and the task name
- connection.py: the bounded Redis client both use
- scripts.py: running a folder's Lua scripts by name
- errors.py: the typed errors that cross the wire (with the status a client sees)

Only pydantic and redis-py are imported here: telemetry (telemetry/) and the
operator's records (ledger/) stand on it, never the other way round.
"""
