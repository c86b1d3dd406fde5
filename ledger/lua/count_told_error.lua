-- A request whose client was told of an error (by its web process: Redis went away, its worker was lost,
-- it timed out, it was cut at shutdown): counted as an error, in place of an answer its worker counted
-- that never reached the client (counting.lua's take_back). Sent again, it counts once.
-- KEYS[1]: the request's state hash   ARGV: count_once's arguments (counting.lua)
-- include: counting.lua
take_back(KEYS[1])
return count_once(KEYS[1], ARGV, 1)
