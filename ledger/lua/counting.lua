-- A request's usage counts, made once whichever process sends them first (see ledger/usage.py).
-- state: the request's state hash. Its `counted` field says it was counted, and holds the counters (JSON:
-- the triples below), so that an answer's can be taken back (take_back).
-- args: from index `from`: the state's TTL if it has none yet, the counters' TTL, then (hash key, field,
-- amount) triples.
local function count_once(state, args, from)
  if redis.call('HSETNX', state, 'counted', cjson.encode({unpack(args, from + 2)})) == 0 then
    return 0
  end
  if redis.call('TTL', state) == -1 then
    redis.call('EXPIRE', state, args[from])
  end
  local counters = {}
  for i = from + 2, #args, 3 do
    redis.call('HINCRBY', args[i], args[i + 1], args[i + 2])
    counters[args[i]] = true
  end
  for key in pairs(counters) do
    redis.call('EXPIRE', key, args[from + 1])
  end
  return 1
end

-- An answer counted for a request whose client was told of an error instead (its web process never had
-- the answer: Redis counted the PUBLISH as heard, then restarted before delivering it): its counters are
-- taken back, and the request is counted again by what follows. (An error counted before is taken back
-- and counted again: the same.)
local function take_back(state)
  local counted = redis.call('HGET', state, 'counted')
  if not counted or counted == '1' then  -- ('1': counted by an older release, which kept no counters)
    return
  end
  local triples = cjson.decode(counted)
  for i = 1, #triples, 3 do
    redis.call('HINCRBY', triples[i], triples[i + 1], -tonumber(triples[i + 2]))
  end
  redis.call('HDEL', state, 'counted')
end
