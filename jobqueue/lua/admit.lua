-- Admission of one job (see jobqueue/admission.py): the pool's queue bound, then the person's rate.
-- KEYS: the person's rate window zset, the pool's queued zset
-- ARGV: now, stale-before time, requests per minute, max queue, the job's lease member, the web lease prefix,
--       the rate window in seconds
local rpm_key, queued_key = KEYS[1], KEYS[2]
local now, stale_before, rpm, max_queue = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local member, lease_prefix, window = ARGV[5], ARGV[6], tonumber(ARGV[7])
-- Places whose web process died (its lease lapsed) count only until the bound
-- is reached: then they are dropped, one pass over the set. Below the bound
-- they change nothing, so the common case costs no pass (O(log n), not O(n)).
local function drop_dead_webs(key)
  local alive = {}
  for _, held in ipairs(redis.call('ZRANGE', key, 0, -1)) do
    local web = string.match(held, '^([^|]+)|')
    if web then
      if alive[web] == nil then alive[web] = redis.call('EXISTS', lease_prefix .. web) == 1 end
      if not alive[web] then redis.call('ZREM', key, held) end
    end
  end
end
redis.call('ZREMRANGEBYSCORE', queued_key, '-inf', stale_before)
local depth = redis.call('ZCARD', queued_key)
if depth >= max_queue then
  drop_dead_webs(queued_key)
  depth = redis.call('ZCARD', queued_key)
end
if depth >= max_queue then return {'queue_full', depth} end
redis.call('ZREMRANGEBYSCORE', rpm_key, '-inf', now - window)
if redis.call('ZCARD', rpm_key) >= rpm then
  return {'rate_limit', depth, redis.call('ZRANGE', rpm_key, 0, 0, 'WITHSCORES')[2]}
end
redis.call('ZADD', rpm_key, now, member)
redis.call('EXPIRE', rpm_key, window + 1)
redis.call('ZADD', queued_key, now, member)
redis.call('EXPIRE', queued_key, 86400)
return {'ok', depth}
