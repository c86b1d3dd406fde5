-- Admission of one tool call (jobqueue/admission.py), an agent's through the MCP gateway or a model's
-- server-side: the person's requests per
-- minute (shared with their model requests), then their own tool calls per minute; an admitted call holds
-- one of the person's slots while it runs (their jobs count it; fairqueue.finish frees it), and is queued
-- for the MCP pool. A method that is not a call (a listing, a read, initialize: ARGV[2] empty) is only
-- counted.
-- KEYS[1]: the person's rate window (zset)   KEYS[2]: their tool calls' rate window (zset)
-- KEYS[3]: the person's running work (zset: lease member -> since)
-- KEYS[4]: the MCP pool's list of calls      ARGV[2]: the call (protocol/gateway.py's Call, JSON)
-- ARGV[1]: the named arguments:
--   now       the time (epoch seconds)
--   rpm       the person's requests per minute
--   tool_rpm  the person's tool calls per minute
--   member    the call's lease member (web process | call id)
--   window    the rate window, in seconds
--   hold      whether an admitted call holds a slot (a gateway call's; a model's server-side call runs
--             under its job's)
-- Returns {'ok'}, or {'rate_limit' | 'tool_rate_limit', the oldest counted call's time}.
local A = cjson.decode(ARGV[1])
local rpm_key, tool_key = KEYS[1], KEYS[2]
redis.call('ZREMRANGEBYSCORE', rpm_key, '-inf', A.now - A.window)
if redis.call('ZCARD', rpm_key) >= A.rpm then
  return {'rate_limit', redis.call('ZRANGE', rpm_key, 0, 0, 'WITHSCORES')[2]}
end
redis.call('ZREMRANGEBYSCORE', tool_key, '-inf', A.now - A.window)
if redis.call('ZCARD', tool_key) >= A.tool_rpm then
  return {'tool_rate_limit', redis.call('ZRANGE', tool_key, 0, 0, 'WITHSCORES')[2]}
end
for _, k in ipairs({rpm_key, tool_key}) do
  redis.call('ZADD', k, A.now, A.member)
  redis.call('EXPIRE', k, A.window + 1)
end
if ARGV[2] ~= '' then
  if A.hold then
    redis.call('ZADD', KEYS[3], A.now, A.member)
    redis.call('EXPIRE', KEYS[3], 86400)
  end
  redis.call('RPUSH', KEYS[4], ARGV[2])
end
return {'ok'}
