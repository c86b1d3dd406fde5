-- The audit log's one writer per change (see ledger/audit.py): the state recorded for a subject is
-- replaced by the new one only if it differs; the caller that replaced it writes the entries.
-- KEYS[1]: the subject's recorded state   ARGV[1]: the new state (JSON)
-- Returns: "=" when unchanged, else the old state (false when none was recorded).
local old = redis.call('GET', KEYS[1])
if old == ARGV[1] then
  return '='
end
redis.call('SET', KEYS[1], ARGV[1])
return old
