-- One request's usage counts, made once whichever process sends them first (see protocol/usage.py).
-- KEYS: the request's state hash (its `counted` field says it was counted)
-- ARGV: the state's TTL if it has none yet, the counters' TTL, then (hash key, field, amount) triples
if redis.call('HSETNX', KEYS[1], 'counted', '1') == 0 then
  return 0
end
if redis.call('TTL', KEYS[1]) == -1 then
  redis.call('EXPIRE', KEYS[1], ARGV[1])
end
local counters = {}
for i = 3, #ARGV, 3 do
  redis.call('HINCRBY', ARGV[i], ARGV[i + 1], ARGV[i + 2])
  counters[ARGV[i]] = true
end
for key in pairs(counters) do
  redis.call('EXPIRE', key, ARGV[2])
end
return 1
