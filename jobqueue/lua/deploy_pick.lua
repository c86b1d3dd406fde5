-- A request of an upstream model gets the deployment it is sent to, and is counted in flight there
-- (jobqueue/deployments.py's pick).
-- ARGV[1]: the key templates (protocol.keys.lua_key_templates)   ARGV[2]: the named arguments:
--   model        the model
--   deployments  its deployments: [{name, weight, max (null: unbounded)}]
--   affinity     whose prompts the request shares, most specific first: the deployment that served
--                one of them last gets it while it has room and is not overloaded
--   hold         those of them (a session's, a cache key's) whose deployment the request waits for while
--                it is full, rather than read its whole conversation again elsewhere: it waits in line
--                there (the deployment's `deploy_waiting`, in the order they came), counted against its
--                room (deployments.lua); [] when it no longer waits, and is out of line
--   exclude      deployments that already failed this request
--   member       how the request is counted in flight ("worker|request")
--   now          the time (epoch seconds)
--   random       a number in [0, 1): ties are broken at random in proportion to the weights
--   probe_ms     how long a probe of a recovering deployment may take
--   at_work      {pool, recent}: a person who holds a place while someone else was served on the model's pool
--                in the last `recent` seconds leaves each deployment's last free place (the room rule
--                fair_take.lua keeps: a colleague's next turn goes to the server holding their conversation)
-- Returns {deployment ('' for none), how ('ready', 'last_resort', 'full', 'held' (waits in line for the
-- deployment holding its conversation) or 'none'), one to probe or ''}.
local K, A = cjson.decode(ARGV[1]), cjson.decode(ARGV[2])
local function key(name, ...) return string.format(K[name], ...) end
-- include: deployments.lua

-- Not overloaded: at most twice the requests per weight of the least loaded, plus one.
local function affine(ready)
  local least = math.huge
  for _, d in ipairs(ready) do least = math.min(least, d.count / d.weight) end
  for _, who in ipairs(A.affinity) do
    local name = redis.call('GET', key('deploy_affinity', A.model, who))
    for _, d in ipairs(ready) do
      if d.name == name and d.count / d.weight <= 2 * least + 1 then return d end
    end
  end
  return nil
end

-- The lowest (in flight + 1) / weight: under load, requests spread in proportion to the weights.
local function least_loaded(ready)
  local best, ties, total = math.huge, {}, 0
  for _, d in ipairs(ready) do
    local score = (d.count + 1) / d.weight
    if score < best - 1e-9 then
      best, ties, total = score, {d}, d.weight
    elseif score <= best + 1e-9 then
      table.insert(ties, d)
      total = total + d.weight
    end
  end
  local point = A.random * total
  for _, d in ipairs(ties) do
    point = point - d.weight
    if point < 0 then return d end
  end
  return ties[#ties]
end

-- Every deployment rests or recovers: the one back soonest (recovering ones first) that has room.
local function soonest_back(candidates)
  local best = nil
  for _, d in ipairs(candidates) do
    if d.room and (best == nil or d.rest_ms < best.rest_ms) then best = d end
  end
  return best
end

local function leave_the_lines()
  for _, d in ipairs(A.deployments) do redis.call('ZREM', key('deploy_waiting', A.model, d.name), A.member) end
end

-- The ready deployment that last served one of the `hold` names, or nil.
local function held_for(candidates)
  for _, who in ipairs(A.hold) do
    local name = redis.call('GET', key('deploy_affinity', A.model, who))
    for _, d in ipairs(candidates) do
      if d.name == name and d.state == 'ready' then return d end
    end
  end
  return nil
end

-- Whether the request's person leaves each deployment's last free place (the member ends in the person).
local person = string.match(A.member, '^[^|]*|[^|]*|(.+)$')
local keeps_last = nil
local function leaves_last_places(candidates)
  if keeps_last == nil then
    keeps_last = person ~= nil and A.at_work.pool ~= '' and leaves_the_last(A.at_work.pool, person, A.now,
      A.at_work.recent, function() return places_held(A.model, candidates, person) > 0 end)
  end
  return keeps_last
end

if #A.hold == 0 then leave_the_lines() end
local excluded = {}
for _, name in ipairs(A.exclude) do excluded[name] = true end
local candidates = {}
for _, d in ipairs(A.deployments) do
  if not excluded[d.name] then table.insert(candidates, d) end
end
if #candidates == 0 then return {'', 'none', ''} end
deployment_states(A.model, candidates, A.member)

local probe = ''
for _, d in ipairs(candidates) do
  if d.state == 'recovering' and redis.call('SET', key('probe', A.model, d.name), A.member, 'NX', 'PX', A.probe_ms) then
    probe = d.name
    break
  end
end

local wanted = held_for(candidates)
if wanted and not wanted.room then
  if not leaves_last_places(candidates) then
    local line = key('deploy_waiting', A.model, wanted.name)
    redis.call('ZREMRANGEBYSCORE', line, '-inf', '(' .. (A.now - 600))  -- (a live worker's lost waiter)
    redis.call('ZADD', line, 'NX', A.now, A.member)
    return {'', 'held', probe}
  end
  leave_the_lines()  -- (the place it would wait for is a colleague's)
end

local ready, any_ready = {}, false
for _, d in ipairs(candidates) do
  if d.state == 'ready' then
    any_ready = true
    if d.room and (free_places(d) > 1 or not leaves_last_places(candidates)) then table.insert(ready, d) end
  end
end
local chosen, how = nil, 'ready'
if #ready > 0 then
  chosen = affine(ready) or least_loaded(ready)
elseif not any_ready then
  chosen, how = soonest_back(candidates), 'last_resort'
end
if chosen == nil then return {'', 'full', probe} end
if #A.hold > 0 then leave_the_lines() end  -- (with none, it left them above)
redis.call('ZADD', key('inflight', A.model, chosen.name), A.now, A.member)
redis.call('HINCRBY', key('deployment_metrics'), A.model .. '\31' .. chosen.name .. '\31requests', 1)
return {chosen.name, how, probe}
