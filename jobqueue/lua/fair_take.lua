-- A worker with a free slot takes the fairest job it may run (jobqueue/fairqueue.py's take).
-- The job taken is started in the same round trip (see `start` below).
-- KEYS[1], KEYS[2]: the ready zsets (code completions first, then chat; background work waits in them
-- `background.offset` behind its fair tag)   KEYS[3]: the pool's state hash
-- KEYS[4]: its waiting jobs per person (hash)   KEYS[5]: its admitted, untaken jobs (zset)
-- KEYS[6]: its drained bucket (a counter)
-- KEYS[7]: the tickets on their way to the Celery queue the slot's ticket came from (zset), or '-' for a
-- ticket sent to this worker alone, or none (the slot goes on from its last job)
-- KEYS[8]: its background jobs by the time they were queued (zset)
-- ARGV[1]: the key templates (protocol.keys.lua_key_templates)   ARGV[2]: the named arguments:
--   worker       the worker's id
--   now          the time (epoch seconds, as text: written as it is)
--   want         {job, first}: its ticket's id ('' for none), and whether to take that job first if it may
--                (a ticket sent to this worker alone); any other ticket takes the fairest job, its own or not
--   idle_serial  this worker's one-at-a-time models with a free sequence: model -> {free, sequences,
--                {person -> sequences they hold here}} (null: it does not track them, and takes any job)
--   fresh_after  a free mark older than this is stale (its worker stopped beating)
--   hold         seconds a job handed to another worker is held for it
--   pool         the pool
--   ttl          seconds a job's record is kept (record) and its heartbeat lasts (alive)
--   running      the state a taken job's record starts in (jobqueue.states.JobState.RUNNING)
--   room         seconds a background job waits before it is served ahead of chat (patience), how far
--                behind its tag it waits (offset), and how long ago a person was last served and still counts
--                as at work between turns (recent: see deployments.lua's others_at_work)
-- Returns {found ('job' or 'none'), payload, person, lease, job id, worker to forward to, job to forward,
-- what the job was charged (fair_push.lua; '' if unknown)}.
local K, A = cjson.decode(ARGV[1]), cjson.decode(ARGV[2])
local function key(name, ...) return string.format(K[name], ...) end
-- include: deployments.lua
local completions, chats = KEYS[1], KEYS[2]
local state, waiting, queued, drained, background_since = KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[8]
-- The slot's ticket has arrived: it is no longer on its way, whatever the slot finds.
local want = A.want.job
if KEYS[7] ~= '-' then redis.call('ZREM', KEYS[7], want) end
local worker, now, tracks_free = A.worker, tonumber(A.now), A.idle_serial ~= cjson.null
-- This worker's idle copies of one-at-a-time models (it knows; the free sets are for finding others).
-- (model -> {free sequences, sequences, {person -> sequences held}, spare sequences}: see copy_verdict)
local idle_here = {}
if tracks_free then
  for model, counts in pairs(A.idle_serial) do
    idle_here[model] = {free = counts[1], of = counts[2], holders = counts[3] or {}, spare = counts[4] or 0}
  end
end
local FIELDS = {'person', 'limit', 'lease', 'model', 'serial', 'expires', 'web', 'reserved', 'payload', 'tag', 'ready',
                'member', 'enqueued', 'affinity', 'deployments', 'since', 'session', 'charge'}
local forward = nil

local function read(job_id)
  local values = redis.call('HMGET', key('job', job_id), unpack(FIELDS))
  if not values[1] then return nil end
  local job = {id = job_id}
  for i, name in ipairs(FIELDS) do job[name] = values[i] end
  return job
end

local function unqueue(job)
  redis.call('ZREM', job.ready, job.member)
  if job.since then redis.call('ZREM', job.since, job.member) end
  redis.call('DEL', key('job', job.id))
  redis.call('ZREM', queued, job.lease)
  if redis.call('HINCRBY', waiting, job.person, -1) <= 0 then
    redis.call('HDEL', waiting, job.person)
  end
end

-- Nobody waits for it any more: its time is up, its client left, or its web process died.
local function abandoned(job)
  return tonumber(job.expires) < now or redis.call('EXISTS', key('abort', job.id)) == 1
    or redis.call('EXISTS', key('web_lease', job.web)) == 0
end

-- Whether the person runs fewer than `limit` jobs. Jobs whose web process
-- died count only until the limit is reached: then they are dropped (one pass
-- over the set, each web process's lease read once). Below the limit they
-- change nothing, so the common case costs no pass over the running jobs.
local function below_limit(person, limit)
  local running = key('active', person)
  local count = redis.call('ZCARD', running)
  if count < limit then return true end
  return count - drop_dead(running, 'web_lease') < limit
end

local function is_free(model, w)
  local since = redis.call('ZSCORE', key('free', model), w)
  return since and tonumber(since) >= A.fresh_after
end

-- Hand the job to worker w (free for its model): it is held for w a moment,
-- and w no longer counts as free. The caller sends w a ticket.
local function reserve(job, w)
  forward = {w, job.id}
  redis.call('HSET', key('job', job.id), 'reserved', w, 'reserved_until', tostring(now + A.hold))
  redis.call('ZREM', key('free', job.model), w)
  redis.call('SET', key('reserved', job.model, w), job.id, 'PX', math.floor(A.hold * 1000))
end

-- Hand the job to another worker whose copy of its model is free, if there is one.
local function reserve_elsewhere(job)
  local others = redis.call('ZREVRANGEBYSCORE', key('free', job.model), '+inf', A.fresh_after, 'LIMIT', 0, 2)
  for _, w in ipairs(others) do
    if w ~= worker then return reserve(job, w) end
  end
end

-- Background work not yet past its patience: it must leave the model room for an interactive turn (one
-- sequence of this worker's copy, one place of its bounded deployments), so that it never holds a turn back
-- longer than the turn's own first token takes. Past its patience it takes the last room too; and a copy of
-- one sequence, which cannot leave one, runs it when idle (nothing interactive waits: it is queued behind).
local function must_leave_room(job)
  if not job.since then return false end
  local since = redis.call('ZSCORE', job.since, job.member)
  return not since or tonumber(since) > now - A.room.patience
end

-- Whether a job of a bounded upstream must leave the last free place to a turn: background work, and a
-- person who already holds a place while others are at work (the room rule, deployments.lua's
-- leaves_the_last). Background work leaves one over all the deployments; such a person, one on each (a
-- colleague's next turn goes to the server holding their conversation: deploy_pick.lua keeps the same
-- rule). (The same for a local model's last free sequence on this worker: copy_verdict below.)
local function room_left(job, deployments)
  if room_on_one(deployments, 2) then return true end  -- (the counts first: Redis is read only when it matters)
  local holds_one = leaves_the_last(A.pool, job.person, now, A.room.recent,
    function() return places_held(job.model, deployments, job.person) > 0 end)
  if has_room(deployments, 2) then return not holds_one end
  return not (must_leave_room(job) or holds_one)
end

-- Promised to another worker (reserved for it, not yet expired).
local function reserved_elsewhere(job)
  if not job.reserved or job.reserved == '' or job.reserved == worker then return false end
  return tonumber(redis.call('HGET', key('job', job.id), 'reserved_until') or '0') > now
end

-- Its person is at their concurrency limit: it waits, its pool noted among those where their jobs wait on it.
local function at_limit(job)
  if below_limit(job.person, tonumber(job.limit)) then return false end
  redis.call('SADD', key('blocked', job.person), A.pool)
  redis.call('EXPIRE', key('blocked', job.person), 86400)
  return true
end

-- An upstream model whose deployments are all bounded: it waits while every one is full, or while it must
-- leave the last place (room_left); its model is noted as held for deploy_wake.lua.
local function deployments_full(job)
  if not job.deployments or job.deployments == '' then return false end
  local deployments = cjson.decode(job.deployments)
  deployment_states(job.model, deployments)
  if has_room(deployments) and room_left(job, deployments) then return false end
  redis.call('HSET', key('held', A.pool), job.model, job.deployments)
  redis.call('EXPIRE', key('held', A.pool), 86400)
  return true
end

-- The worker holding the job's prefix gets it if it is free: the holder of the first of its affinity names
-- (its cache key's, its session's, its person's; split on \31) that has one. A busy holder means no
-- affinity (it is not handed to a holder of a less specific name).
local function affinity_verdict(job)
  for name in string.gmatch(job.affinity or job.person, '[^\31]+') do
    local affine = redis.call('GET', key('affinity', job.model, name))
    if affine then
      if affine ~= worker and not forward and is_free(job.model, affine) then
        reserve(job, affine)
        return 'skip'
      end
      return 'take'
    end
  end
  return 'take'
end

-- The free sequences a job must leave on a copy: none for a person's interactive job while they hold none
-- here; else its spare ones (kept for a person with nothing running: a colleague's turn starts at once
-- beside one person's long jobs, however long they run), and at least one for background work and, by the
-- room rule, for a person holding one while others are at work.
local function sequences_to_leave(job, idle)
  local holds, background = idle.holders[job.person] ~= nil, must_leave_room(job)
  if not (holds or background) then return 0 end
  if idle.spare > 0 or background then return math.max(idle.spare, 1) end
  -- (the room rule reads Redis: only when it decides, at the last free sequence)
  return (idle.free == 1 and leaves_the_last(A.pool, job.person, now, A.room.recent, true)) and 1 or 0
end

-- A model that runs one job at a time per worker: this worker's copy must be idle and not promised to
-- another job, and leave the sequences sequences_to_leave keeps (the counts read first; a copy all free
-- takes anything: one of a single sequence runs background work when idle); then the affinity decides. A
-- copy elsewhere may be reserved for it instead (background work waits).
local function copy_verdict(job)
  local promised = redis.call('GET', key('reserved', job.model, worker))
  local here = idle_here[job.model] ~= nil and (not promised or promised == job.id)
  local idle = idle_here[job.model]
  local background = must_leave_room(job)
  -- (roomy, of a copy that is not idle here: the job may take any copy's free sequence, not only spare ones)
  local leave = sequences_to_leave(job, idle or {free = 0, holders = {}, spare = 0})
  local roomy = (idle and (idle.free == idle.of or idle.free > leave)) or (not idle and leave == 0)
  if here and roomy then
    return job.reserved == worker and 'take' or affinity_verdict(job)
  end
  if not forward and (here and not background or not here and roomy) then reserve_elsewhere(job) end
  return 'skip'
end

-- 'take', 'skip' (maybe forwarding it), or 'drop'.
local function verdict(job)
  if abandoned(job) then return 'drop' end
  if reserved_elsewhere(job) or at_limit(job) or deployments_full(job) then return 'skip' end
  if job.serial ~= '1' or not tracks_free then return 'take' end
  return copy_verdict(job)
end

-- Started as it is taken (nobody else can take it: it left the queue above):
-- counted as drained, its first heartbeat, then its state (its web process reads it
-- while the job is silent, and finds it alive).
local function start(job)
  redis.call('INCR', drained)
  redis.call('EXPIRE', drained, 120)
  redis.call('SET', key('alive', job.id), '1', 'EX', A.ttl.alive)
  -- The record says whose it was (and of which session, what kind of work), how long it waited, and who
  -- runs it; the running jobs list it (the console's live view: jobqueue.running).
  redis.call('HSET', key('state', job.id), 'person', job.person, 'enqueued_at', job.enqueued or '',
             'taken_at', A.now, 'status', A.running, 'started_at', A.now, 'worker', worker, 'model', job.model,
             'session', job.session or '', 'priority', job.since and 'background' or 'interactive')
  redis.call('EXPIRE', key('state', job.id), A.ttl.record)
  redis.call('ZADD', key('running'), A.now, job.id)
  redis.call('ZADD', key('seen', A.pool), now, job.person)  -- (deployments.lua's others_at_work)
  redis.call('EXPIRE', key('seen', A.pool), 86400)
  redis.call('ZREMRANGEBYSCORE', key('seen', A.pool), '-inf', now - A.room.recent)
end

local function take(job)
  unqueue(job)
  start(job)
  redis.call('ZADD', key('active', job.person), now, job.lease)
  redis.call('EXPIRE', key('active', job.person), 86400)
  if tonumber(job.tag) > tonumber(redis.call('HGET', state, 'vtime') or '0') then
    redis.call('HSET', state, 'vtime', job.tag)
  end
  if job.serial == '1' and tracks_free then
    redis.call('ZREM', key('free', job.model), worker)
    redis.call('DEL', key('reserved', job.model, worker))
  end
  local f = forward or {'', ''}
  return {'job', job.payload, job.person, job.lease, job.id, f[1], f[2], job.charge or ''}
end

-- Whether a job that is not background work waits (a completion, or chat ahead of the offset).
local function interactive_waiting()
  if redis.call('ZCARD', completions) > 0 then return true end
  local head = redis.call('ZRANGE', chats, 0, 0, 'WITHSCORES')
  return head[2] ~= nil and tonumber(head[2]) < A.room.offset
end

if want ~= '' then
  local job = read(want)
  if job and A.want.first then
    -- (a background job's own ticket does not put it ahead of an interactive job: the scan below orders them)
    local v = not (job.since and interactive_waiting()) and verdict(job)
    if v == 'take' then return take(job) end
    if v == 'drop' then unqueue(job) end
  elseif not job and KEYS[7] ~= '-' then
    -- Its job is not queued: taken or gone already, or not queued yet (its
    -- ticket was sent beside its queueing, and overtook it). The mark makes
    -- that queueing ask for another ticket; otherwise it lapses unread (the
    -- queueing was written a moment before the ticket: seconds are plenty).
    redis.call('SET', key('early_ticket', want), '1', 'EX', 10)
  end
end

-- A member of `set` this worker meets: its job, if the worker may take it; else nil, and whether it stays
-- in the set (a job gone, or dropped on the way as abandoned, leaves it).
local function meet(set, member)
  local job = read(string.sub(member, 17))
  if not job then
    redis.call('ZREM', set, member)
    return nil, false
  end
  local v = verdict(job)
  if v == 'take' then return job, false end
  if v == 'drop' then unqueue(job) end
  return nil, v ~= 'drop'
end

-- The first job of the set (fairest first) this worker may take.
local function first_of(ready)
  local position = 0
  while true do
    local batch = redis.call('ZRANGE', ready, position, position + 63)
    if #batch == 0 then return nil end
    for _, member in ipairs(batch) do
      local job, stays = meet(ready, member)
      if job then return job end
      if stays then position = position + 1 end
    end
  end
end

-- The longest-waiting background job past its patience this worker may take (none starves behind chat).
local function first_aged()
  local aged = redis.call('ZRANGEBYSCORE', background_since, '-inf', now - A.room.patience, 'LIMIT', 0, 64)
  for _, member in ipairs(aged) do
    local job = meet(background_since, member)
    if job then return job end
  end
end

local job = first_of(completions) or first_aged() or first_of(chats)
if job then return take(job) end
local f = forward or {'', ''}
return {'none', '', '', '', '', f[1], f[2]}
