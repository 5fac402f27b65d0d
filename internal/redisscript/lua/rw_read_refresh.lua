-- rw_read_refresh: extend a read share to a full TTL if it is still live.
-- KEYS[1] readers (sorted set token -> expiry)
-- ARGV[1] reader token      ARGV[2] TTL in milliseconds
-- Returns 1 when extended, 0 when the share had expired or was never held.
redis.replicate_commands()
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'zset' then
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score or tonumber(score) <= now then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  return 0
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIRE', KEYS[1], math.max(1, tonumber(last[2]) - now))
return 1
