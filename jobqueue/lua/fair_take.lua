-- A worker with a free slot takes the fairest job it may run (see jobqueue/fairqueue.py).
-- The job taken is started in the same round trip (see `start` below).
-- KEYS: ready zsets (code completions first, then chat), the pool's state hash, its waiting hash,
--       the admission queue zset, the pool's drained bucket, and for a slot going on from its last
--       job (no ticket of its own) the Celery queues' lists of the two classes' tickets
-- ARGV: see fairqueue.take
local ready_sets = {KEYS[1], KEYS[2]}
local state, waiting, queued, drained = KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local ticket_lists = {}
if #KEYS >= 8 then ticket_lists = {[KEYS[1]] = KEYS[7], [KEYS[2]] = KEYS[8]} end
local p_job, p_active, p_free, p_affinity, p_lease, p_record, p_reserved, p_blocked =
  ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8]
local worker, now, want, tracks_free, fresh_after, hold, pool, record_ttl =
  ARGV[9], tonumber(ARGV[10]), ARGV[11], ARGV[12] == '1', tonumber(ARGV[13]), tonumber(ARGV[14]), ARGV[15],
  tonumber(ARGV[16])
local alive_ttl = tonumber(ARGV[17])
-- This worker's idle copies of one-at-a-time models (it knows; the free sets are for finding others).
local idle_here = {}
for i = 18, #ARGV do idle_here[ARGV[i]] = true end
local FIELDS = {'person', 'limit', 'lease', 'model', 'serial', 'expires', 'web', 'reserved', 'payload', 'tag', 'ready',
                'member', 'enqueued', 'affinity'}
local forward = nil

local function read(job_id)
  local values = redis.call('HMGET', p_job .. job_id, unpack(FIELDS))
  if not values[1] then return nil end
  local job = {id = job_id}
  for i, name in ipairs(FIELDS) do job[name] = values[i] end
  return job
end

local function unqueue(job)
  redis.call('ZREM', job.ready, job.member)
  redis.call('DEL', p_job .. job.id)
  redis.call('ZREM', queued, job.lease)
  if redis.call('HINCRBY', waiting, job.person, -1) <= 0 then
    redis.call('HDEL', waiting, job.person)
  end
end

-- Nobody waits for it any more: its time is up, its client left, or its web process died.
local function abandoned(job)
  return tonumber(job.expires) < now or redis.call('EXISTS', p_record .. job.id .. ':abort') == 1
    or redis.call('EXISTS', p_lease .. job.web) == 0
end

-- Whether the person runs fewer than `limit` jobs. Jobs whose web process
-- died count only until the limit is reached: then they are dropped (one pass
-- over the set, each web process's lease read once). Below the limit they
-- change nothing, so the common case costs no pass over the running jobs.
local function below_limit(person, limit)
  local key = p_active .. person
  local count = redis.call('ZCARD', key)
  if count < limit then return true end
  local alive = {}
  for _, held in ipairs(redis.call('ZRANGE', key, 0, -1)) do
    local web = string.match(held, '^([^|]+)|')
    if web then
      if alive[web] == nil then alive[web] = redis.call('EXISTS', p_lease .. web) == 1 end
      if not alive[web] then
        redis.call('ZREM', key, held)
        count = count - 1
      end
    end
  end
  return count < limit
end

local function is_free(model, w)
  local since = redis.call('ZSCORE', p_free .. model, w)
  return since and tonumber(since) >= fresh_after
end

-- Hand the job to worker w (free for its model): it is held for w a moment,
-- and w no longer counts as free. The caller sends w a ticket.
local function reserve(job, w)
  forward = {w, job.id}
  redis.call('HSET', p_job .. job.id, 'reserved', w, 'reserved_until', tostring(now + hold))
  redis.call('ZREM', p_free .. job.model, w)
  redis.call('SET', p_reserved .. job.model .. ':' .. w, job.id, 'PX', math.floor(hold * 1000))
end

-- 'take', 'skip' (maybe forwarding it), or 'drop'.
local function verdict(job)
  if abandoned(job) then return 'drop' end
  if job.reserved and job.reserved ~= '' and job.reserved ~= worker then
    local until_ = tonumber(redis.call('HGET', p_job .. job.id, 'reserved_until') or '0')
    if until_ > now then return 'skip' end
  end
  if not below_limit(job.person, tonumber(job.limit)) then
    redis.call('SADD', p_blocked .. job.person, pool)
    redis.call('EXPIRE', p_blocked .. job.person, 86400)
    return 'skip'
  end
  if job.serial ~= '1' or not tracks_free then return 'take' end
  -- A model that runs one job at a time per worker: this worker's copy must
  -- be idle and not promised to another job ...
  local promised = redis.call('GET', p_reserved .. job.model .. ':' .. worker)
  local here = idle_here[job.model] and (not promised or promised == job.id)
  if here and job.reserved == worker then return 'take' end
  if not here then
    if not forward then
      local others = redis.call('ZREVRANGEBYSCORE', p_free .. job.model, '+inf', fresh_after, 'LIMIT', 0, 1)
      if others[1] then reserve(job, others[1]) end
    end
    return 'skip'
  end
  -- ... and the worker holding the person's (or the cache key's) prompt gets the job if it is free.
  local affine = redis.call('GET', p_affinity .. job.model .. ':' .. (job.affinity or job.person))
  if affine and affine ~= worker and not forward and is_free(job.model, affine) then
    reserve(job, affine)
    return 'skip'
  end
  return 'take'
end

-- Started as it is taken (nobody else can take it: it left the queue above):
-- counted as drained, its first heartbeat, then its state (its web process reads it
-- while the job is silent, and finds it alive).
local function start(job)
  local record = p_record .. job.id
  redis.call('INCR', drained)
  redis.call('EXPIRE', drained, 120)
  redis.call('SET', record .. ':alive', '1', 'EX', alive_ttl)
  -- The record says whose it was, how long it waited, and who runs it.
  redis.call('HSET', record .. ':state', 'person', job.person, 'enqueued_at', job.enqueued or '',
             'taken_at', tostring(now), 'status', 'running', 'started_at', ARGV[10], 'worker', worker)
  redis.call('EXPIRE', record .. ':state', record_ttl)
end

-- Each queued job brought a ticket. A slot going on from its last job takes
-- one without: its ticket stays behind, and under a long overload, with
-- every slot going on, they piled up by the tens of thousands (each later a
-- task that finds nothing). One ticket more than the jobs waiting in its
-- class is dropped: tickets never fall below the jobs waiting, so a free slot
-- elsewhere still gets one for each.
local function drop_surplus_ticket(ready)
  local list = ticket_lists[ready]
  if list and redis.call('LLEN', list) > redis.call('ZCARD', ready) then
    redis.call('RPOP', list)
  end
end

local function take(job)
  unqueue(job)
  drop_surplus_ticket(job.ready)
  start(job)
  redis.call('ZADD', p_active .. job.person, now, job.lease)
  redis.call('EXPIRE', p_active .. job.person, 86400)
  if tonumber(job.tag) > tonumber(redis.call('HGET', state, 'vtime') or '0') then
    redis.call('HSET', state, 'vtime', job.tag)
  end
  if job.serial == '1' and tracks_free then
    redis.call('ZREM', p_free .. job.model, worker)
    redis.call('DEL', p_reserved .. job.model .. ':' .. worker)
  end
  local f = forward or {'', ''}
  return {'job', job.payload, job.person, job.lease, job.id, f[1], f[2]}
end

if want ~= '' then
  local job = read(want)
  if job then
    local v = verdict(job)
    if v == 'take' then return take(job) end
    if v == 'drop' then unqueue(job) end
  end
end
for _, ready in ipairs(ready_sets) do
  local position = 0
  while true do
    local batch = redis.call('ZRANGE', ready, position, position + 63)
    if #batch == 0 then break end
    for _, member in ipairs(batch) do
      local job = read(string.sub(member, 17))
      if not job then
        redis.call('ZREM', ready, member)
      else
        local v = verdict(job)
        if v == 'take' then return take(job) end
        if v == 'drop' then unqueue(job) else position = position + 1 end
      end
    end
  end
end
local f = forward or {'', ''}
return {'none', '', '', '', '', f[1], f[2]}
