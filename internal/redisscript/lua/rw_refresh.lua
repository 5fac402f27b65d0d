-- rw_refresh: extend an RWMutex's write lock or a read share to a full TTL
-- if it is still held, and the name's marker with it.
-- KEYS[1] writer key        KEYS[2] readers (sorted set token -> expiry)
-- KEYS[3] the name's main key (the marker =RWMutex)
-- ARGV[1] token             ARGV[2] TTL in milliseconds
-- ARGV[3] 'w' for the write lock, 'r' for a read share
-- Returns 1 when extended, 0 when it had expired or was never held, or
-- when the name's main key is not the marker: it went behind the lock's
-- back (deleted, evicted), and the hold with it, since another kind of
-- lock may have taken the name since; the hold is then dropped, and
-- nothing is written over another kind's key.
redis.replicate_commands()
local ttl = tonumber(ARGV[2])
if dlock_holder(KEYS[3]) ~= 'RWMutex' then
  if ARGV[3] == 'w' then
    if redis.call('GET', KEYS[1]) == ARGV[1] then
      redis.call('DEL', KEYS[1])
    end
  elseif redis.call('TYPE', KEYS[2])['ok'] == 'zset' then
    redis.call('ZREM', KEYS[2], ARGV[1])
  end
  return 0
end
if ARGV[3] == 'w' then
  if redis.call('GET', KEYS[1]) ~= ARGV[1] then
    return 0
  end
  redis.call('PEXPIRE', KEYS[1], ttl)
else
  if redis.call('TYPE', KEYS[2])['ok'] ~= 'zset' then
    return 0
  end
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local score = redis.call('ZSCORE', KEYS[2], ARGV[1])
  if not score or tonumber(score) <= now then
    redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
    return 0
  end
  redis.call('ZADD', KEYS[2], now + ttl, ARGV[1])
  if redis.call('PTTL', KEYS[2]) < ttl then
    redis.call('PEXPIRE', KEYS[2], ttl)
  end
end
if redis.call('PTTL', KEYS[3]) < ttl then
  redis.call('SET', KEYS[3], '=RWMutex', 'PX', ttl)
end
return 1
