-- A waiting job leaves the queue unrun (its client left, its time is up): jobqueue/fairqueue.py's remove.
-- KEYS[1]: the job's hash   KEYS[2]: the pool's waiting jobs per person (hash)
-- Returns 1, or 0 if it was not waiting (a worker took it).
local job, waiting = KEYS[1], KEYS[2]
local ready, member, person, since = unpack(redis.call('HMGET', job, 'ready', 'member', 'person', 'since'))
if not ready then return 0 end
redis.call('ZREM', ready, member)
if since then redis.call('ZREM', since, member) end
redis.call('DEL', job)
if redis.call('HINCRBY', waiting, person, -1) <= 0 then
  redis.call('HDEL', waiting, person)
end
return 1
