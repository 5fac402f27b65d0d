-- semaphore_refresh: extend a permit to a full TTL if its holder still has
-- it and it has not expired.
-- KEYS[1] permits (sorted set)  ARGV[1] token  ARGV[2] TTL in milliseconds
-- Returns 1 when extended, 0 when the permit is gone or expired.
redis.replicate_commands()
if redis.call('TYPE', KEYS[1])['ok'] ~= 'zset' then
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
redis.call('ZADD', KEYS[1], 'XX', string.format('%.0f', now + tonumber(ARGV[2])), ARGV[1])
return 1
