-- A worker's copies of one-at-a-time models that are idle count as free,
-- unless a job was just reserved for it (fair_take.lua's reserve).
-- ARGV: free-set prefix, reservation prefix, worker, now, then the models
local p_free, p_reserved, worker, now = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
for i = 5, #ARGV do
  if redis.call('EXISTS', p_reserved .. ARGV[i] .. ':' .. worker) == 0 then
    redis.call('ZADD', p_free .. ARGV[i], now, worker)
    redis.call('EXPIRE', p_free .. ARGV[i], 86400)
  end
end
return 1
