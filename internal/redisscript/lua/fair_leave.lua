-- fair_leave: take a waiter that gives up out of a fair lock's queue.
-- KEYS[1] lock key          KEYS[2] queue          KEYS[3] waiter deadlines
-- ARGV[1] waiter token      ARGV[2] waiter channel prefix
-- Dead waiters are dropped from the head of the queue; then, if the lock
-- is free, the (new) head is woken, so that a hand-over aimed at the
-- leaving waiter is not lost.
-- Returns the number of queue entries removed for the token.
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
local removed = redis.call('LREM', KEYS[2], 0, ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local head = redis.call('LINDEX', KEYS[2], 0)
while head do
  local deadline = tonumber(redis.call('ZSCORE', KEYS[3], head))
  if deadline and deadline > now then
    break
  end
  redis.call('LPOP', KEYS[2])
  redis.call('ZREM', KEYS[3], head)
  head = redis.call('LINDEX', KEYS[2], 0)
end
if head and redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('PUBLISH', ARGV[2] .. head, 'released')
end
return removed
