-- quorum_depose: one node's part of a Redlock ForceUnlock, second round.
-- The first round (quorum_force.lua) recorded on each node the token it
-- deleted there; this one records every token deleted on any node on
-- every node, so that a lease whose key one node did not hold (a
-- competitor's attempt held it, or the node lost it) cannot be retaken
-- there either, and deletes the key if it holds one of them (a retake
-- that landed between the rounds). Each token is kept ARGV[1] ms from now
-- at least, as quorum_force.lua keeps them.
-- KEYS[1] lock key   KEYS[2] deposed tokens (a sorted set)
-- ARGV[1] how long the tokens are kept at least, in ms   ARGV[2...] the tokens
-- Returns 1 if the key was deleted, else 0.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local life = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
for i = 2, #ARGV do
  redis.call('ZADD', KEYS[2], 'GT', now + life, ARGV[i])
end
if redis.call('PTTL', KEYS[2]) < life then
  redis.call('PEXPIRE', KEYS[2], life)
end
local v = redis.pcall('GET', KEYS[1])
if type(v) ~= 'string' then
  return 0
end
if string.sub(v, -1) == '\1' then v = string.sub(v, 1, -2) end -- a waiter's mark (see acquire.lua)
if redis.call('ZSCORE', KEYS[2], v) then -- just kept, if at all
  return redis.call('DEL', KEYS[1])
end
return 0
