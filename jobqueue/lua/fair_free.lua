-- A worker's copies of one-at-a-time models that are idle count as free,
-- unless a job was just reserved for it (fair_take.lua's reserve).
-- ARGV[1]: the key templates (protocol.keys.lua_key_templates)   ARGV[2]: the named arguments:
--   worker  the worker's id
--   now     the time (epoch seconds)
--   models  its idle one-at-a-time models
local K, A = cjson.decode(ARGV[1]), cjson.decode(ARGV[2])
local function key(name, ...) return string.format(K[name], ...) end
for _, model in ipairs(A.models) do
  if redis.call('EXISTS', key('reserved', model, A.worker)) == 0 then
    redis.call('ZADD', key('free', model), A.now, A.worker)
    redis.call('EXPIRE', key('free', model), 86400)
  end
end
return 1
