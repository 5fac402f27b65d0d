-- refresh: extend the lock to a full TTL if this owner holds it.
-- KEYS[1] lock key          ARGV[1] owner token    ARGV[2] TTL in milliseconds
-- Returns 1 when extended, 0 when the key is absent or held by another owner.
-- The value may carry a waiter's mark, a trailing byte 1 (see acquire.lua).
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] or v == ARGV[1] .. '\1' then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
