-- A worker starts a job it took from the fair queue (see protocol/commands.py start_job), in one round trip.
-- KEYS: the job's claim key, abort key, web lease key ('' for none), the pool's drained bucket,
--       the job's alive key, state hash, events channel
-- ARGV: worker id, record TTL, alive TTL, now, '1' to announce it (not when known to be expired or aborted),
--       the started event
local claim, abort, lease, drained = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local alive, state, channel = KEYS[5], KEYS[6], KEYS[7]
local worker, record_ttl, alive_ttl, now, announce, started = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
if not redis.call('SET', claim, worker, 'NX', 'EX', record_ttl) then
  return {0, 0}
end
redis.call('INCR', drained)
redis.call('EXPIRE', drained, 120)
-- Nobody would read it: its client left, or its web process died.
local aborted = redis.call('EXISTS', abort) == 1 or (lease ~= '' and redis.call('EXISTS', lease) == 0)
if aborted then return {1, 1} end
if announce ~= '1' then return {1, 0} end
-- Announced: its first heartbeat, its state, then the started event (after
-- the heartbeat, so the front end finds it alive).
redis.call('SET', alive, '1', 'EX', alive_ttl)
redis.call('HSET', state, 'status', 'running', 'started_at', now, 'worker', worker)
redis.call('EXPIRE', state, record_ttl)
redis.call('PUBLISH', channel, started)
return {1, 0}
