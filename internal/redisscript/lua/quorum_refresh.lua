-- quorum_refresh: one node's part of a Redlock extension. Extends the lock
-- to a full TTL if this owner holds it, and otherwise tells an absent key
-- from another owner's, so that the client can take back (quorum_retake)
-- a node that lost the key once a majority has extended the lease.
-- KEYS[1] lock key          ARGV[1] owner token    ARGV[2] TTL in milliseconds
-- Returns 1 when extended, 0 when another owner holds the key, -1 when the
-- key is absent. The value may carry a waiter's mark, a trailing byte 1
-- (see acquire.lua), though a Redlock acquire does not set one.
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] or v == ARGV[1] .. '\1' then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
if v then
  return 0
end
return -1
