"""The job queue: the one owner of a job's life in Redis, used by the web
process and the workers alike (neither touches a job's keys itself).

- admission.py: whether a job may queue at all (a person's rate, the pool's
  queue bound), checked and recorded in one script
- fairqueue.py: the waiting jobs in the order workers take them (fair shares
  across people, completions first, one-at-a-time models handed to an idle
  worker, prompt-cache affinity), and the take that starts a job
- records.py: a job's record while and after it runs (state, heartbeat,
  abort mark)
- lua/: one script per transition

Only redis-py and the protocol package are imported here.
"""
