-- A finished job's final event, published on its reply channel, and its usage counted (once) only if a web
-- process heard it: nobody hears a channel whose web process lost Redis (it listens under a new identity
-- since, app/relay.py) or died, and that job's client was told of an error instead. Heard is not yet
-- delivered: a Redis that stops drops what it had still to send, and the web process that then tells its
-- client of an error takes the count back (count_told_error.lua), so an answer keeps its counters.
-- KEYS[1]: the request's state hash   ARGV[1]: the reply channel   ARGV[2]: the final event
-- ARGV[3...]: count_once's arguments (counting.lua)
-- Returns the subscribers that heard it (0: nothing counted).
-- include: counting.lua
local heard = redis.call('PUBLISH', ARGV[1], ARGV[2])
if heard > 0 then
  count_once(KEYS[1], ARGV, 3)
end
return heard
