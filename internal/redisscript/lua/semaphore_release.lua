-- semaphore_release: give a permit back and wake waiters.
-- KEYS[1] permits (sorted set)  ARGV[1] token  ARGV[2] release channel
-- Returns 0 when the token holds no live permit (an expired one is removed
-- all the same), or 1 plus the number of subscribers woken.
redis.replicate_commands()
if redis.call('TYPE', KEYS[1])['ok'] ~= 'zset' then
  return 0
end
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score then
  return 0
end
redis.call('ZREM', KEYS[1], ARGV[1])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if tonumber(score) <= now then
  return 0
end
return 1 + redis.call('PUBLISH', ARGV[2], 'released')
