-- rw_write_acquire: take the write side of an RWMutex if no writer and no
-- live reader holds it; otherwise, for a waiting writer, announce its intent
-- so that new readers are refused.
-- KEYS[1] the name's main key: free, or the marker =RWMutex, set here
--         with the lock's TTL as the longest hold
-- KEYS[2] writer key (string)   KEYS[3] readers (sorted set token -> expiry)
-- KEYS[4] writer intents (sorted set token -> expiry)   KEYS[5] fence counter (of the lock's slot)
-- ARGV[1] writer token      ARGV[2] TTL in milliseconds
-- ARGV[3] intent lifetime in milliseconds; 0 announces nothing (TryLock)
-- ARGV[4] the waiting writer's intent id (stable across its attempts)
-- ARGV[5] the caller's owner token, or empty: if it holds a read share,
--         the call fails with DLOCKUPGRADE instead of waiting for itself
-- Returns the new fence (> 0) when taken, or minus the time in milliseconds
-- after which trying again makes sense (<= 0). Taking the lock withdraws
-- the writer's intent. Every type is checked before the first write.
redis.replicate_commands()
local function want(key, kinds)
  local kind = redis.call('TYPE', key)['ok']
  if not kinds[kind] then
    return redis.error_reply('WRONGTYPE dlock RWMutex key ' .. key .. ' holds a ' .. kind .. '; another kind of lock uses this name')
  end
end
local holder = dlock_holder(KEYS[1])
if holder and holder ~= 'RWMutex' then
  return dlock_refuse(holder)
end
local err = want(KEYS[2], {none = true, string = true}) or
  want(KEYS[3], {none = true, zset = true}) or want(KEYS[4], {none = true, zset = true}) or
  want(KEYS[5], {none = true, string = true})
if err then return err end
local counter = redis.call('GET', KEYS[5])
if counter and not tonumber(counter) then
  return redis.error_reply('DLOCKFENCE dlock fence counter ' .. KEYS[5] .. ' does not hold a number')
end
if not holder then
  -- No marker: no lock holds the name. A writer or readers left here lost
  -- their hold when the marker went behind their back (see rw_refresh.lua).
  if redis.call('PTTL', KEYS[2]) ~= -1 then
    redis.call('DEL', KEYS[2])
  end
  redis.call('DEL', KEYS[3])
end
local pttl = redis.call('PTTL', KEYS[2])
if pttl == -1 then
  return redis.error_reply('DLOCKNOTTL dlock lock key ' .. KEYS[2] .. ' exists without an expiry: it was not set by dlock')
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
if ARGV[5] ~= '' then
  local mine = redis.call('ZSCORE', KEYS[3], ARGV[5])
  if mine then
    return redis.error_reply('DLOCKUPGRADE dlock RWMutex ' .. KEYS[3] .. ': the caller holds a read share')
  end
end
local wait = pttl
if wait < 0 then
  local last = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
  if last[2] then
    wait = tonumber(last[2]) - now
  end
end
if wait >= 0 then
  local px = tonumber(ARGV[3])
  if px > 0 then
    redis.call('ZADD', KEYS[4], now + px, ARGV[4])
    local latest = redis.call('ZRANGE', KEYS[4], -1, -1, 'WITHSCORES')
    redis.call('PEXPIRE', KEYS[4], math.max(1, tonumber(latest[2]) - now))
  end
  return -wait
end
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('SET', KEYS[1], '=RWMutex', 'PX', ARGV[2])
end
redis.call('ZREM', KEYS[4], ARGV[4])
local fence = redis.call('INCR', KEYS[5])
local clock = tonumber(t[1]) * 1000000 + tonumber(t[2])
if fence < clock - 100000 then -- see acquire.lua: lifted to the clock when 100ms behind it
  fence = clock
  redis.call('SET', KEYS[5], string.format('%.0f', fence))
end
return fence
