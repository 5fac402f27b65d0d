-- quorum_retake: take back, for a Redlock lease that a majority of nodes
-- has just extended, a node where the lease's key is absent (the node
-- lost it, or a competitor's failed attempt held it at the grant).
-- KEYS[1] lock key          ARGV[1] owner token    ARGV[2] TTL in milliseconds
-- KEYS[2] the tokens that ForceUnlock deposed, each scored by the time
--         until which it is kept (see quorum_force.lua)
-- Returns 1 when the key was set, 0 when the node holds a key already (it
-- never overwrites another owner's key) or the token was deposed (an
-- operator's ForceUnlock deleted the lease's keys: a renewal under way
-- does not put one back). The fence counter is not touched.
local kept = redis.call('ZSCORE', KEYS[2], ARGV[1])
if kept then
  local t = redis.call('TIME')
  if tonumber(kept) > tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) then
    return 0
  end
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 1
end
return 0
