-- semaphore_acquire: take one permit of a semaphore if one is free, and
-- bump the fencing counter.
-- KEYS[1] permits: a sorted set of token -> expiry (server time, ms)
-- KEYS[2] limit: the number of permits
-- KEYS[3] fence counter (of the lock's slot)
-- KEYS[4] the name's main key: free, or the marker =Semaphore, set here
--         with the permit's TTL as the longest hold
-- ARGV[1] token             ARGV[2] TTL in milliseconds
-- ARGV[3] the permits the caller was configured with: used, and stored,
--         when KEYS[2] does not exist; a stored limit wins over it.
-- The permits, the limit and the marker expire no sooner than the TTL from
-- now: every key outlives its last permit by at most a TTL.
-- Returns the new fence (> 0) when a permit was taken, or minus the
-- milliseconds until the earliest permit expires (<= 0) when all are taken.
-- Expired permits (holders that stopped renewing) are removed first. The
-- fence is the counter plus one; a missing counter starts again from the
-- server's TIME in microseconds, as in acquire.lua. Every check that can
-- fail comes before the first write.
redis.replicate_commands()
local holder = dlock_holder(KEYS[4])
if holder and holder ~= 'Semaphore' then
  return dlock_refuse(holder)
end
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'none' and kind ~= 'zset' then
  return redis.error_reply('WRONGTYPE dlock semaphore key ' .. KEYS[1] .. ' holds a ' .. kind)
end
kind = redis.call('TYPE', KEYS[2])['ok']
local limit = tonumber(ARGV[3])
if kind == 'string' then
  local raw = redis.call('GET', KEYS[2])
  limit = tonumber(raw)
  if not limit or limit < 1 or limit ~= math.floor(limit) then
    return redis.error_reply('DLOCKLIMIT dlock semaphore limit ' .. KEYS[2] .. ' holds "' .. raw .. '", not a whole number >= 1')
  end
elseif kind ~= 'none' then
  return redis.error_reply('WRONGTYPE dlock semaphore limit key ' .. KEYS[2] .. ' holds a ' .. kind)
end
if not holder then
  -- No marker: no lock holds the name. Permits left here lost their hold
  -- when the marker went behind their back (see semaphore_refresh.lua).
  redis.call('DEL', KEYS[1])
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= limit then
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return -math.max(0, tonumber(first[2]) - now)
end
local fence = redis.pcall('INCR', KEYS[3])
if type(fence) == 'table' and fence.err then
  if string.find(fence.err, 'WRONGTYPE') then
    return redis.error_reply(fence.err)
  end
  return redis.error_reply('DLOCKFENCE dlock fence counter ' .. KEYS[3] .. ' does not hold a number')
end
local clock = tonumber(t[1]) * 1000000 + tonumber(t[2])
if fence < clock - 100000 then -- see acquire.lua: lifted to the clock when 100ms behind it
  fence = clock
  redis.call('SET', KEYS[3], string.format('%.0f', fence))
end
local ttl = tonumber(ARGV[2])
if kind == 'none' then
  redis.call('SET', KEYS[2], ARGV[3], 'PX', ttl)
elseif redis.call('PTTL', KEYS[2]) < ttl then
  redis.call('PEXPIRE', KEYS[2], ttl)
end
redis.call('ZADD', KEYS[1], string.format('%.0f', now + ttl), ARGV[1])
if redis.call('PTTL', KEYS[1]) < ttl then
  redis.call('PEXPIRE', KEYS[1], ttl)
end
if redis.call('PTTL', KEYS[4]) < ttl then
  redis.call('SET', KEYS[4], '=Semaphore', 'PX', ttl)
end
return fence
