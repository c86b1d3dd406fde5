-- Admission of one job (jobqueue/admission.py): the pool's queue bound, then the person's rate.
-- KEYS[1]: the person's rate window (zset)   KEYS[2]: the pool's admitted, untaken jobs (zset)
-- ARGV[1]: the key templates (protocol.keys.lua_key_templates)   ARGV[2]: the named arguments:
--   now           the time (epoch seconds)
--   stale_before  admitted places older than this are free again (their job was never taken)
--   rpm           the person's requests per minute
--   max_queue     the pool's queue bound
--   member        the job's admission member (web process | job id)
--   window        the rate window, in seconds
-- Returns {'ok', depth}, {'queue_full', depth} or {'rate_limit', depth, the oldest request's time}.
local K, A = cjson.decode(ARGV[1]), cjson.decode(ARGV[2])
local function key(name, ...) return string.format(K[name], ...) end
local rpm_key, queued_key = KEYS[1], KEYS[2]

-- Places whose web process died (its lease lapsed) count only until the bound
-- is reached: then they are dropped, one pass over the set. Below the bound
-- they change nothing, so the common case costs no pass (O(log n), not O(n)).
local function drop_dead_webs(set)
  local alive = {}
  for _, held in ipairs(redis.call('ZRANGE', set, 0, -1)) do
    local web = string.match(held, '^([^|]+)|')
    if web then
      if alive[web] == nil then alive[web] = redis.call('EXISTS', key('web_lease', web)) == 1 end
      if not alive[web] then redis.call('ZREM', set, held) end
    end
  end
end

redis.call('ZREMRANGEBYSCORE', queued_key, '-inf', A.stale_before)
local depth = redis.call('ZCARD', queued_key)
if depth >= A.max_queue then
  drop_dead_webs(queued_key)
  depth = redis.call('ZCARD', queued_key)
end
if depth >= A.max_queue then return {'queue_full', depth} end
redis.call('ZREMRANGEBYSCORE', rpm_key, '-inf', A.now - A.window)
if redis.call('ZCARD', rpm_key) >= A.rpm then
  return {'rate_limit', depth, redis.call('ZRANGE', rpm_key, 0, 0, 'WITHSCORES')[2]}
end
redis.call('ZADD', rpm_key, A.now, A.member)
redis.call('EXPIRE', rpm_key, A.window + 1)
redis.call('ZADD', queued_key, A.now, A.member)
redis.call('EXPIRE', queued_key, 86400)
return {'ok', depth}
