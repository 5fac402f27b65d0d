-- rw_read_release: give up a read share, and wake waiters when it was the
-- last live one.
-- KEYS[1] readers (sorted set token -> expiry)
-- ARGV[1] reader token      ARGV[2] release channel
-- Returns 1 plus the number of subscribers woken when the share was given
-- up, 0 when it had expired or was never held.
redis.replicate_commands()
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'zset' then
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if not score or tonumber(score) <= now then
  return 0
end
redis.call('ZREM', KEYS[1], ARGV[1])
if redis.call('ZCARD', KEYS[1]) == 0 then
  return 1 + redis.call('PUBLISH', ARGV[2], 'released')
end
return 1
