-- Pools with jobs held for full deployments (fair_take.lua marks them, per model) where a deployment
-- has room that no take saw: the places of a worker that died are dropped here once its presence
-- lapsed. (A request that ends frees its place and its slot takes the next job itself.) A model
-- with room loses its mark; its pool is returned, and gets a ticket (jobqueue/deployments.py's wake_held).
-- ARGV[1]: the key templates   ARGV[2]: the named arguments:
--   pools   the pools to look at (those of the calling worker)
-- Returns the pools to wake.
local K, A = cjson.decode(ARGV[1]), cjson.decode(ARGV[2])
local function key(name, ...) return string.format(K[name], ...) end
-- include: deployments.lua

local woken = {}
for _, pool in ipairs(A.pools) do
  local held = key('held', pool)
  local marks = redis.call('HGETALL', held)
  local room = false
  for i = 1, #marks, 2 do
    local deployments = cjson.decode(marks[i + 1])
    deployment_states(marks[i], deployments)
    if has_room(deployments) then
      redis.call('HDEL', held, marks[i])
      room = true
    end
  end
  if room then table.insert(woken, pool) end
end
return woken
