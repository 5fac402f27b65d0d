-- quorum_fence: raise a node's fence counter to a Redlock grant's fence, but
-- only while that node still holds the grant's lock key.
-- KEYS[1] lock key    KEYS[2] fence counter
-- ARGV[1] owner token ARGV[2] the fence
-- Returns 1 when the lock key is this owner's (the counter is then at least
-- the fence), 0 when it is not.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
local counter = tonumber(redis.call('GET', KEYS[2]) or '0')
if counter == nil or counter < tonumber(ARGV[2]) then
  redis.call('SET', KEYS[2], ARGV[2])
end
return 1
