-- semaphore_refresh: extend a permit to a full TTL if its holder still has
-- it and it has not expired; the permits, the limit and the name's marker
-- then expire no sooner than the TTL from now.
-- KEYS[1] permits (sorted set)  KEYS[2] limit  KEYS[3] the name's main key
-- ARGV[1] token             ARGV[2] TTL in milliseconds
-- Returns 1 when extended, 0 when the permit is gone or expired, or when
-- the name's main key is not the marker: it went behind the semaphore's
-- back (deleted, evicted), and the permit with it, since another kind of
-- lock may have taken the name since; the permit is then dropped, and
-- nothing is written over another kind's key.
redis.replicate_commands()
if redis.call('TYPE', KEYS[1])['ok'] ~= 'zset' then
  return 0
end
if dlock_holder(KEYS[3]) ~= 'Semaphore' then
  redis.call('ZREM', KEYS[1], ARGV[1])
  return 0
end
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score then
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if tonumber(score) <= now then
  return 0
end
local ttl = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], 'XX', string.format('%.0f', now + ttl), ARGV[1])
for i = 1, 2 do
  local pttl = redis.call('PTTL', KEYS[i])
  if pttl >= 0 and pttl < ttl then
    redis.call('PEXPIRE', KEYS[i], ttl)
  end
end
if redis.call('PTTL', KEYS[3]) < ttl then
  redis.call('SET', KEYS[3], '=Semaphore', 'PX', ttl)
end
return 1
