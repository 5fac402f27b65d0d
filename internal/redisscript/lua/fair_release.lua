-- fair_release: delete a fair lock if this owner holds it, and wake the
-- head of its queue only.
-- KEYS[1] lock key          KEYS[2] queue          KEYS[3] waiter deadlines
-- ARGV[1] owner token       ARGV[2] waiter channel prefix (the channel of a
-- waiter is the prefix followed by its token)
-- ARGV[3] optional: a waiter timeout in milliseconds. When given, the owner
--         goes back to the head of the queue, with that deadline: it was
--         granted the lock by an attempt whose reply came too late, or was
--         lost, gives the grant back, and keeps its place in line (moved
--         to the head if a later attempt put it back in the queue).
-- ARGV[4] optional, with ARGV[3]: the owner's waiter token, its place in
--         the queue, when the lock was taken with a token of the attempt's
--         own (see fair_acquire.lua; default ARGV[1])
-- Dead waiters (deadline passed, in server TIME) are dropped from the head
-- of the queue before the new head is woken.
-- Returns 1 plus the number of subscribers woken when released, 0 when the
-- key is absent or held by another owner.
redis.replicate_commands()
local function bad(key, want)
  local kind = redis.call('TYPE', key)['ok']
  if kind ~= 'none' and kind ~= want then
    return 'WRONGTYPE dlock key ' .. key .. ' holds a ' .. kind .. ', not a ' .. want
  end
end
local e = bad(KEYS[1], 'string') or bad(KEYS[2], 'list') or bad(KEYS[3], 'zset')
if e then
  return redis.error_reply(e)
end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if ARGV[3] and ARGV[3] ~= '' then
  local wait = tonumber(ARGV[3])
  local waiter = ARGV[4] or ARGV[1]
  redis.call('LREM', KEYS[2], 0, waiter)
  redis.call('LPUSH', KEYS[2], waiter)
  redis.call('ZADD', KEYS[3], now + wait, waiter)
  if redis.call('PTTL', KEYS[2]) < wait then
    redis.call('PEXPIRE', KEYS[2], wait)
  end
  if redis.call('PTTL', KEYS[3]) < wait then
    redis.call('PEXPIRE', KEYS[3], wait)
  end
end
local head = redis.call('LINDEX', KEYS[2], 0)
while head do
  local deadline = tonumber(redis.call('ZSCORE', KEYS[3], head))
  if deadline and deadline > now then
    return 1 + redis.call('PUBLISH', ARGV[2] .. head, 'released')
  end
  redis.call('LPOP', KEYS[2])
  redis.call('ZREM', KEYS[3], head)
  head = redis.call('LINDEX', KEYS[2], 0)
end
return 1
