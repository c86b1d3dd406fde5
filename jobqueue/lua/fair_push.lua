-- Queue one job in its pool's fair queue (see jobqueue/fairqueue.py).
-- KEYS: ready zset (of the job's class), the job's hash, the pool's state hash, the pool's waiting hash,
--       the Celery queue's list (for the ticket), the pool's admitted zset ('-': queue it unchecked)
-- ARGV: job id, payload, person, weight, policy, the ticket message ('' for none), the job's admission member,
--       then the job's hash fields as name, value pairs
local ready, job, state, waiting, tickets, admitted = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local job_id, payload, person, weight, policy, ticket = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5], ARGV[6]
-- Sent in one round trip with its admission: queued only if admission took it.
if admitted ~= '-' and not redis.call('ZSCORE', admitted, ARGV[7]) then
  return false
end
local seq = redis.call('HINCRBY', state, 'seq', 1)
local tag
if policy == 'fifo' then
  tag = seq
else
  -- Start-time fair queueing: a job starts at the pool's virtual time, or
  -- after the person's previous job, whichever is later; each job costs
  -- 1/weight. A person with a backlog is interleaved with newcomers.
  local now_v = tonumber(redis.call('HGET', state, 'vtime') or '0')
  local last = tonumber(redis.call('HGET', state, 'finish:' .. person) or '0')
  tag = math.max(now_v, last)
  redis.call('HSET', state, 'finish:' .. person, string.format('%.17g', tag + 1 / weight))
end
-- Equal tags are served in arrival order: the member starts with the sequence number.
local member = string.format('%015d', seq) .. '|' .. job_id
redis.call('ZADD', ready, tag, member)
redis.call('HSET', job, 'payload', payload, 'person', person, 'member', member, 'ready', ready,
           'tag', string.format('%.17g', tag), unpack(ARGV, 8))
redis.call('EXPIRE', job, 86400)
redis.call('HINCRBY', waiting, person, 1)
redis.call('EXPIRE', state, 86400)
redis.call('EXPIRE', waiting, 86400)
-- The job and its ticket are queued together: a ticket never runs ahead of its job.
if ticket ~= '' then
  redis.call('LPUSH', tickets, ticket)
end
return member
