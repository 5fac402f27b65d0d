-- quorum_force: one node's part of a Redlock ForceUnlock, first round.
-- Deletes the lock key, whoever holds it, wakes the waiters of the plain
-- channel, and adds the holder's token to the name's deposed tokens, so
-- that no retake of the deposed lease (quorum_retake.lua) sets the key
-- here again. The deposed tokens are a sorted set, each scored by the
-- time (the server's, in ms) until which it is kept: twice the time the
-- key had left, past the deposed lease's end and as long again for a
-- retake call still on its way. A token's time is never shortened, tokens
-- whose time has passed are removed whenever one is added, and the set
-- expires with its last token: forcing a name often keeps only the tokens
-- of the last two TTLs.
-- KEYS[1] lock key   KEYS[2] deposed tokens (a sorted set)
-- ARGV[1] release channel
-- Returns {1 if a key was deleted else 0, the holder's token ('' when
-- none), the time the key had left in ms (0 when none, or no expiry)}.
-- A key of another Redis type is left alone: WRONGTYPE.
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'none' then
  return {0, '', 0}
end
if kind ~= 'string' then
  return redis.error_reply('WRONGTYPE the lock key holds a ' .. kind .. ' that dlock did not write')
end
kind = redis.call('TYPE', KEYS[2])['ok']
if kind ~= 'none' and kind ~= 'zset' then -- checked before the first write
  return redis.error_reply('WRONGTYPE dlock key ' .. KEYS[2] .. ' holds a ' .. kind .. ', not a sorted set')
end
local token = redis.call('GET', KEYS[1])
if string.sub(token, -1) == '\1' then token = string.sub(token, 1, -2) end -- a waiter's mark (see acquire.lua)
local pttl = redis.call('PTTL', KEYS[1])
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[1], 'released')
if pttl <= 0 then -- not a lease's: no retake follows
  return {1, token, 0}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
redis.call('ZADD', KEYS[2], 'GT', now + 2 * pttl, token)
if redis.call('PTTL', KEYS[2]) < 2 * pttl then
  redis.call('PEXPIRE', KEYS[2], 2 * pttl)
end
return {1, token, pttl}
