"""The operator's records, each with one writer:

- usage.py: each person's usage by UTC day (written once per request, by the
  job queue's finish and withdraw), the last errors and the status page's
  per-minute series; and the maintenance that folds old days
- request_log.py: one record per model request (written by the web process
  that answered it, app/record_buffer.py)
- audit.py: who changed keys and models (the admin tool and the web process)
- persistence.py: whether Redis keeps these records across a restart
- lua/: the scripts that count a request once

Stands on protocol/ (every key is minted in protocol/keys.py).
"""
