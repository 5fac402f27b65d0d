-- rw_downgrade: turn a held write lock into a read share in one step, so
-- that no other writer can come in between, and wake waiting readers.
-- KEYS[1] writer key        KEYS[2] readers (sorted set token -> expiry)
-- KEYS[3] fence counter (of the lock's slot)
-- KEYS[4] the name's main key (the marker =RWMutex)
-- ARGV[1] writer token      ARGV[2] new reader token
-- ARGV[3] TTL in milliseconds   ARGV[4] release channel
-- Returns the read share's new fence (> 0), or 0 when the writer no longer
-- holds the lock. Every type is checked before the first write.
redis.replicate_commands()
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
if dlock_holder(KEYS[4]) ~= 'RWMutex' then -- the marker went, and the write lock with it (see rw_refresh.lua)
  redis.call('DEL', KEYS[1])
  return 0
end
local kind = redis.call('TYPE', KEYS[2])['ok']
if kind ~= 'none' and kind ~= 'zset' then
  return redis.error_reply('WRONGTYPE dlock RWMutex key ' .. KEYS[2] .. ' holds a ' .. kind)
end
local counter = redis.call('GET', KEYS[3])
if counter and not tonumber(counter) then
  return redis.error_reply('DLOCKFENCE dlock fence counter ' .. KEYS[3] .. ' does not hold a number')
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('DEL', KEYS[1])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[3]), ARGV[2])
local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
redis.call('PEXPIRE', KEYS[2], math.max(1, tonumber(last[2]) - now))
local fence = redis.call('INCR', KEYS[3])
local clock = tonumber(t[1]) * 1000000 + tonumber(t[2])
if fence < clock - 100000 then -- see acquire.lua: lifted to the clock when 100ms behind it
  fence = clock
  redis.call('SET', KEYS[3], string.format('%.0f', fence))
end
if redis.call('PTTL', KEYS[4]) < tonumber(ARGV[3]) then
  redis.call('SET', KEYS[4], '=RWMutex', 'PX', ARGV[3])
end
redis.call('PUBLISH', ARGV[4], 'released')
return fence
