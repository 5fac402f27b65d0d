-- quorum_depose: one node's part of a Redlock ForceUnlock, second round.
-- The first round (quorum_force.lua) recorded on each node the token it
-- deleted there; this one records every token deleted on any node on
-- every node, so that a lease whose key one node did not hold (a
-- competitor's attempt held it, or the node lost it) cannot be retaken
-- there either, and deletes the key if it holds one of them (a retake
-- that landed between the rounds).
-- KEYS[1] lock key   KEYS[2] deposed tokens (a set)
-- ARGV[1] how long the set lives at least, in ms   ARGV[2...] the tokens
-- Returns 1 if the key was deleted, else 0.
redis.call('SADD', KEYS[2], unpack(ARGV, 2))
if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[1]) then
  redis.call('PEXPIRE', KEYS[2], ARGV[1])
end
local v = redis.pcall('GET', KEYS[1])
if type(v) ~= 'string' then
  return 0
end
if string.sub(v, -1) == '\1' then v = string.sub(v, 1, -2) end -- a waiter's mark (see acquire.lua)
if redis.call('SISMEMBER', KEYS[2], v) == 1 then
  return redis.call('DEL', KEYS[1])
end
return 0
