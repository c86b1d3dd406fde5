-- Queue one job in its pool's fair queue (jobqueue/fairqueue.py's push).
-- KEYS[1]: the ready zset of the job's class   KEYS[2]: the job's hash   KEYS[3]: the pool's state hash
-- KEYS[4]: the pool's waiting jobs per person (hash)
-- KEYS[5]: the tickets on their way to the job's Celery queue (zset; '-': it needs none, as in tests)
-- KEYS[6]: the pool's admitted jobs (zset; '-': queue it unchecked)
-- KEYS[7]: the job's early-ticket mark, if its ticket was sent beside this call ('-': none was)
-- KEYS[8]: the pool's background jobs by the time they were queued, for a background job ('-': it is not one)
-- KEYS[9], KEYS[10]: how long replies ran (keys.fair_replies_key): its session's ('-': it has none), its
-- person's (absent: its cost is charged as it is)
-- ARGV[1]: the named arguments:
--   job_id          the job's id
--   person, weight  who asked, and their share (a job costs them cost/weight)
--   cost            the job's estimated work, in thousands of tokens (jobqueue/charges.py; absent: 1)
--   reply           with KEYS[9]: {base: its work but the reply's, bound: the reply's max_tokens (0: none is
--                   made; null: unbounded), what: its model and kind, prior: a reply's tokens where none was
--                   learned, smallest: the least a job costs, window: the replies a learned length weighs}
--   behind          how far behind its tag it waits: BACKGROUND_OFFSET for background work, else 0
--   policy          'fair' or 'fifo'
--   member          the job's admission member (web process | job id)
--   fields          the job's scheduling fields, kept in its hash for the take
--   now             the time (epoch seconds)
-- ARGV[2]: the job's JSON (as it is: a large prompt is not decoded here)
-- Returns {the job's member in the ready set, 1 if the caller must send a ticket (its id: the job's),
-- 1 if the job needed one (sent beside or not)}, or false if admission did not take it.
local A, payload = cjson.decode(ARGV[1]), ARGV[2]
local ready, job, state, waiting, tickets, admitted = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local early, since = KEYS[7], KEYS[8] or '-'

-- The mean length of the replies learned in `hash` for `what` (nil: none). Past `window` replies, both sums
-- are scaled back to it: each reply then weighs (1 - 1/window) of the one after it, so a session that changed
-- its ways is charged anew within a few replies.
local function learned(hash, what, window)
  local counted = redis.call('HMGET', hash, 'n:' .. what, 's:' .. what)
  local n, tokens = tonumber(counted[1]), tonumber(counted[2]) or 0
  if not n or n <= 0 then return nil end
  if n > window then
    redis.call('HSET', hash, 'n:' .. what, string.format('%.17g', window),
               's:' .. what, string.format('%.17g', tokens * window / n))
  end
  return tokens / n
end

-- What the job is charged: its prompt as estimated, and its reply as long as the replies its session had of
-- its model and kind, else its person's, else the prior; at most its max_tokens.
local function charge()
  local r = A.reply
  if not r or not KEYS[10] then return A.cost or 1 end
  local reply = 0
  if r.bound ~= 0 then
    reply = (KEYS[9] ~= '-' and learned(KEYS[9], r.what, r.window)) or learned(KEYS[10], r.what, r.window) or r.prior
    if r.bound ~= cjson.null then reply = math.min(reply, r.bound) end
  end
  return math.max(r.base + reply / 1000, r.smallest)
end
-- Sent in one round trip with its admission: queued only if admission took it.
if admitted ~= '-' and not redis.call('ZSCORE', admitted, A.member) then
  return false
end
local seq = redis.call('HINCRBY', state, 'seq', 1)
local cost = charge()
-- A tag is rounded to a grain of 2^-16 thousand tokens (a 65th of a token). Equal work reached by different
-- estimates and debts differs in its last bits when summed in floating point, and a turn queued first went
-- after every colleague's queued later with what should have been the same tag. Rounded, equal work is an
-- equal tag and arrival order decides. (Work is counted in quarter tokens: over a weight of 0.5 to 10 in
-- halves, no tag lies within 3e-9 thousand tokens of halfway between two grains, so the sums' noise cannot
-- tip the rounding until the pool's virtual time passes some 1e7 thousand tokens.)
local GRAIN = 2 ^ 16
local function on_grain(value) return math.floor(value * GRAIN + 0.5) / GRAIN end
local tag
if A.policy == 'fifo' then
  tag = seq
else
  -- Start-time fair queueing: a job starts at the pool's virtual time, or
  -- after the person's previous job, whichever is later; each job costs
  -- its work over the weight. A person with a backlog is interleaved with
  -- newcomers. What the person's jobs that ended cost beyond (or short of)
  -- their estimates, their debt, moves that previous job's end now.
  local now_v = tonumber(redis.call('HGET', state, 'vtime') or '0')
  local last = tonumber(redis.call('HGET', state, 'finish:' .. A.person) or '0')
  local debt = tonumber(redis.call('HGET', state, 'debt:' .. A.person) or '0')
  if debt ~= 0 then redis.call('HDEL', state, 'debt:' .. A.person) end
  tag = on_grain(math.max(now_v, last + debt / A.weight))
  redis.call('HSET', state, 'finish:' .. A.person, string.format('%.17g', tag + cost / A.weight))
end
-- Equal tags are served in arrival order: the member starts with the sequence number.
local member = string.format('%015d', seq) .. '|' .. A.job_id
redis.call('ZADD', ready, tag + (A.behind or 0), member)
local fields = {'payload', payload, 'person', A.person, 'member', member, 'ready', ready,
                'tag', string.format('%.17g', tag), 'charge', string.format('%.17g', cost)}
if since ~= '-' then  -- a background job: its patience runs from now (fair_take.lua)
  redis.call('ZADD', since, A.now, member)
  redis.call('EXPIRE', since, 86400)
  fields[#fields + 1] = 'since'
  fields[#fields + 1] = since
end
for name, value in pairs(A.fields) do
  fields[#fields + 1] = name
  fields[#fields + 1] = value
end
redis.call('HSET', job, unpack(fields))
redis.call('EXPIRE', job, 86400)
redis.call('HINCRBY', waiting, A.person, 1)
redis.call('EXPIRE', state, 86400)
redis.call('EXPIRE', waiting, 86400)
-- A ticket lets a free slot take the fairest job. One is needed while fewer
-- are on their way than jobs wait in this class: a slot going on from its
-- last job takes the next without one, leaving its ticket for a later job.
if tickets == '-' then return {member, 0, 0} end
local needed = redis.call('ZCARD', tickets) < redis.call('ZCARD', ready)
local function on_its_way()
  redis.call('ZADD', tickets, A.now, A.job_id)
  redis.call('EXPIRE', tickets, 86400)
end
if early ~= '-' then
  -- Its ticket was sent beside this call. Counted on its way, unless a slot
  -- already took it (the ticket overtook this call: the take left a mark):
  -- then the caller sends another.
  on_its_way()
  if redis.call('DEL', early) == 1 then return {member, 1, 1} end
  return {member, 0, needed and 1 or 0}
end
if needed then
  on_its_way()
  return {member, 1, 1}
end
return {member, 0, 0}
