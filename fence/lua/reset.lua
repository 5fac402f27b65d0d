-- reset: an operator sets the fence recorded for a user's key, even lower.
-- KEYS[1] the key that holds the fence
-- KEYS[2] the key in which an earlier version kept the fence, read while
--         KEYS[1] does not exist; KEYS[1] again if none
-- ARGV[1] the fence to record, in decimal without leading zeros; '0' to
--         forget it
-- Returns the fence recorded before, '0' for none.
local previous = redis.call('GET', KEYS[1])
if not previous and KEYS[2] ~= KEYS[1] then previous = redis.call('GET', KEYS[2]) end
if ARGV[1] == '0' and KEYS[2] == KEYS[1] then
  redis.call('DEL', KEYS[1])
else
  -- '0' where an earlier version's key would otherwise be read again
  redis.call('SET', KEYS[1], ARGV[1])
end
return previous or '0'
