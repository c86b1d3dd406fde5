-- A deployment failed a request before its first token (or a probe): the request leaves its
-- in-flight count, and the deployment rests, unless it already does (one outage, one rest)
-- (jobqueue/deployments.py's failed).
-- ARGV[1]: the key templates   ARGV[2]: the named arguments:
--   model, deployment  the deployment that failed, and its model
--   member          the request as counted in flight ('' for a probe)
--   cooldown_ms     the first rest; each failure in a row doubles it ...
--   max_cooldown_ms ... up to this
--   retry_after_ms  the upstream's Retry-After (0: none): the rest is at least this, up to the most
-- Returns the milliseconds of rest it is in.
local K, A = cjson.decode(ARGV[1]), cjson.decode(ARGV[2])
local function key(name, ...) return string.format(K[name], ...) end
local metric = A.model .. '\31' .. A.deployment .. '\31'
if A.member ~= '' then
  redis.call('ZREM', key('inflight', A.model, A.deployment), A.member)
  redis.call('HINCRBY', key('deployment_metrics'), metric .. 'failures', 1)
end
redis.call('DEL', key('probe', A.model, A.deployment))
local cooldown = key('cooldown', A.model, A.deployment)
local left = redis.call('PTTL', cooldown)
if left > 0 then return left end
local failures_key = key('failures', A.model, A.deployment)
local failures = redis.call('INCR', failures_key)
redis.call('EXPIRE', failures_key, 86400)
local rest = math.min(A.cooldown_ms * 2 ^ (failures - 1), A.max_cooldown_ms)
rest = math.max(1, math.floor(math.min(math.max(rest, A.retry_after_ms), A.max_cooldown_ms)))
redis.call('SET', cooldown, failures, 'PX', rest)
redis.call('HINCRBY', key('deployment_metrics'), metric .. 'cooldowns', 1)
return rest
