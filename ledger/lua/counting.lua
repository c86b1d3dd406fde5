-- A request's usage counts, made once whichever process sends them first (see ledger/usage.py).
-- state: the request's state hash (its `counted` field says it was counted)
-- args: from index `from`: the state's TTL if it has none yet, the counters' TTL, then (hash key, field,
-- amount) triples
local function count_once(state, args, from)
  if redis.call('HSETNX', state, 'counted', '1') == 0 then
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
