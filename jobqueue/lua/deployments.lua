-- A model's deployments as they stand, and drop_dead (included by fair_take.lua and
-- deploy_pick.lua; see jobqueue/deployments.py). Needs `key` (the key templates) in scope. A deployment is a table
-- {name, weight, max (null: unbounded)}; deployment_states fills in:
--   count    its requests in flight, and those waiting for a place on it (a session's turn waits for the
--            server holding its conversation: deploy_pick.lua), but for `asker` and those who came after it;
--            a dead worker's are dropped when they would fill it
--   room     whether it takes another
--   state    'ready'; 'resting' (a cooldown after a failure: rest_ms left); or 'recovering' (rested,
--            not yet found healthy again: only a probe, or a last resort, goes there)

-- A set's members "owner|...": those whose owner's liveness key (the template named `liveness`:
-- a web process's lease, a worker's presence) lapsed are dropped; returns how many.
local function drop_dead(set, liveness)
  local dropped, alive = 0, {}
  for _, member in ipairs(redis.call('ZRANGE', set, 0, -1)) do
    local owner = string.match(member, '^([^|]+)|')
    if owner then
      if alive[owner] == nil then alive[owner] = redis.call('EXISTS', key(liveness, owner)) == 1 end
      if not alive[owner] then
        redis.call('ZREM', set, member)
        dropped = dropped + 1
      end
    end
  end
  return dropped
end

-- Requests waiting for a place on the deployment ahead of `asker` (all of them if it is not one).
local function waiting_ahead(waiting, asker)
  local since = asker and redis.call('ZSCORE', waiting, asker)
  if since then return redis.call('ZCOUNT', waiting, '-inf', '(' .. since) end
  return redis.call('ZCARD', waiting)
end

local function deployment_states(model, deployments, asker)
  for _, d in ipairs(deployments) do
    local inflight, waiting = key('inflight', model, d.name), key('deploy_waiting', model, d.name)
    local bounded = d.max ~= nil and d.max ~= cjson.null
    local count = redis.call('ZCARD', inflight) + waiting_ahead(waiting, asker)
    if bounded and count >= d.max and drop_dead(inflight, 'worker') + drop_dead(waiting, 'worker') > 0 then
      count = redis.call('ZCARD', inflight) + waiting_ahead(waiting, asker)
    end
    d.count, d.room = count, (not bounded) or count < d.max
    local rest = redis.call('PTTL', key('cooldown', model, d.name))
    if rest > 0 then
      d.state, d.rest_ms = 'resting', rest
    elseif redis.call('EXISTS', key('failures', model, d.name)) == 1 then
      d.state, d.rest_ms = 'recovering', 0
    else
      d.state, d.rest_ms = 'ready', 0
    end
  end
end

-- Places a deployment has free (math.huge: unbounded).
local function free_places(d)
  if d.max == nil or d.max == cjson.null then return math.huge end
  return math.max(d.max - d.count, 0)
end

-- Whether someone else than `person` was served on `pool` in the last `recent` seconds (at work between
-- turns: their next turn may come any moment).
local function others_at_work(pool, person, now, recent)
  local seen = redis.call('ZRANGEBYSCORE', key('seen', pool), now - recent, '+inf', 'LIMIT', 0, 2)
  return seen[1] ~= nil and (seen[1] ~= person or seen[2] ~= nil)
end

-- The room rule, for every place a person's jobs take (a place on a bounded deployment, a sequence of a
-- local model's copy): one who already holds one while someone else is at work on the pool leaves the last
-- free one, so that a colleague's next turn finds it at once and one person's many agents never fill a
-- model between the others' turns. `holds`: whether they hold one, or a function that finds out (called
-- only when others are at work: it reads Redis).
local function leaves_the_last(pool, person, now, recent, holds)
  if holds == false or not others_at_work(pool, person, now, recent) then return false end
  return holds == true or holds()
end

-- The places `person`'s requests hold on the model's deployments (in-flight members end in "|person").
local function places_held(model, deployments, person)
  local suffix, held = '|' .. person, 0
  for _, d in ipairs(deployments) do
    for _, member in ipairs(redis.call('ZRANGE', key('inflight', model, d.name), 0, -1)) do
      if string.sub(member, -#suffix) == suffix then held = held + 1 end
    end
  end
  return held
end

-- Whether one deployment has `places` free: a ready one; or, when none is ready, any (a last resort).
local function room_on_one(deployments, places)
  local ready, on_ready, on_any = false, false, false
  for _, d in ipairs(deployments) do
    local enough = free_places(d) >= places
    if d.state == 'ready' then
      ready, on_ready = true, on_ready or enough
    else
      on_any = on_any or enough
    end
  end
  if ready then return on_ready end
  return on_any
end

-- Whether `places` requests (default one) could be placed now: on ready deployments with room; or, when none
-- is ready (all rest or recover), on any with room, as a last resort. False: it must wait for room.
local function has_room(deployments, places)
  local ready, free, last_resort = false, 0, 0
  for _, d in ipairs(deployments) do
    if d.state == 'ready' then
      ready, free = true, free + free_places(d)
    else
      last_resort = last_resort + free_places(d)
    end
  end
  return (ready and free or last_resort) >= (places or 1)
end
