"""The operator's records, each with one writer:

- usage.py: each person's usage by UTC day, the last errors and the status
  page's per-minute series, read; and the maintenance that folds old days
- counting.py: their one writer, which only the job queue calls (its finish
  and withdraw: once per request, whichever process ends it)
- request_log.py: one record per model request (written by the web process
  that answered it, app/record_buffer.py)
- audit.py: who changed keys and models (the admin tool and the web process),
  and what the guard found (guard_log.py, with its per-day counters)
- tool_use.py: who used which tools of the MCP gateway, per day
- persistence.py: whether Redis keeps these records across a restart
- lua/: the scripts that count a request once

Stands on protocol/ (every key is minted in protocol/keys.py).
"""
