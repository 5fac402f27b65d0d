-- fair_acquire: take a fair (FIFO) lock, or join its queue of waiters.
-- KEYS[1] lock key (its value, the holder's token, starts with =FairMutex=)
-- KEYS[2] queue (list of waiter tokens)
-- KEYS[3] waiter deadlines (sorted set token -> server time in ms)
-- KEYS[4] fence counter (of the lock's slot)
-- ARGV[1] waiter token (its place in the queue)
-- ARGV[2] TTL in milliseconds
-- ARGV[3] waiter timeout in milliseconds
-- ARGV[4] '1' to join (or stay in) the queue when not obtained, '0' not to
-- ARGV[5] optional: the token the lock is taken with, the attempt's own
--         (default ARGV[1]), so that a clean-up of this attempt, keyed by
--         it, can never release a later attempt's grant to the same waiter
-- Waiters at the head of the queue whose deadline (server TIME) has passed
-- are dropped first. The lock is taken when it is free and the queue is
-- empty or headed by this token; the token then leaves the queue, and the
-- fence is bumped as in acquire.lua. Otherwise, with ARGV[4] = '1', the
-- token is appended to the queue unless already in it, and its deadline is
-- set to now + the waiter timeout.
-- Returns the new fence (> 0) when the lock was taken, or minus the
-- expected wait in milliseconds (<= 0): the holder's remaining TTL, or the
-- time until the head waiter's deadline when the lock is free.
-- Everything that can fail is read before the first write.
redis.replicate_commands()
local function bad(key, want)
  local kind = redis.call('TYPE', key)['ok']
  if kind ~= 'none' and kind ~= want then
    return 'WRONGTYPE dlock key ' .. key .. ' holds a ' .. kind .. ', not a ' .. want
  end
end
local holder = dlock_holder(KEYS[1])
if holder and holder ~= 'FairMutex' then
  return dlock_refuse(holder)
end
local e = bad(KEYS[2], 'list') or bad(KEYS[3], 'zset') or bad(KEYS[4], 'string')
if e then
  return redis.error_reply(e)
end
local pttl = redis.call('PTTL', KEYS[1])
if pttl == -1 then
  return redis.error_reply('DLOCKNOTTL dlock lock key ' .. KEYS[1] .. ' exists without an expiry: it was not set by dlock')
end
local counter = redis.call('GET', KEYS[4])
if counter and not tonumber(counter) then
  return redis.error_reply('DLOCKFENCE dlock fence counter ' .. KEYS[4] .. ' does not hold a number')
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local token = ARGV[1]

local head = redis.call('LINDEX', KEYS[2], 0)
local deadline
while head do
  deadline = tonumber(redis.call('ZSCORE', KEYS[3], head))
  if deadline and deadline > now then
    break
  end
  redis.call('LPOP', KEYS[2])
  redis.call('ZREM', KEYS[3], head)
  head = redis.call('LINDEX', KEYS[2], 0)
end

if pttl == -2 and (not head or head == token) then
  if head then
    redis.call('LPOP', KEYS[2])
    redis.call('ZREM', KEYS[3], token)
  end
  redis.call('SET', KEYS[1], ARGV[5] or token, 'PX', ARGV[2])
  local fence = redis.call('INCR', KEYS[4])
  local clock = tonumber(t[1]) * 1000000 + tonumber(t[2])
  if fence < clock - 100000 then -- see acquire.lua: lifted to the clock when 100ms behind it
    fence = clock
    redis.call('SET', KEYS[4], string.format('%.0f', fence))
  end
  return fence
end

if ARGV[4] == '1' then
  local wait = tonumber(ARGV[3])
  if not redis.call('ZSCORE', KEYS[3], token) then
    redis.call('RPUSH', KEYS[2], token)
  end
  redis.call('ZADD', KEYS[3], now + wait, token)
  -- Every deadline is at most now + wait: the keys vanish with the last
  -- live waiter.
  redis.call('PEXPIRE', KEYS[2], wait)
  redis.call('PEXPIRE', KEYS[3], wait)
  if not head then
    head, deadline = token, now + wait
  end
end
if pttl >= 0 then
  return -pttl
end
if head == token then
  return 0
end
return -math.max(0, deadline - now)
