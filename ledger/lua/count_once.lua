-- One request's usage counts, made once whichever process sends them first (see ledger/usage.py).
-- KEYS[1]: the request's state hash   ARGV: count_once's arguments (counting.lua)
-- include: counting.lua
return count_once(KEYS[1], ARGV, 1)
