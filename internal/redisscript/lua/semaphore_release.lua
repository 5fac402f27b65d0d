-- semaphore_release: give a permit back and wake waiters; the name's
-- marker goes with the last live permit.
-- KEYS[1] permits (sorted set)  KEYS[2] limit  KEYS[3] the name's main key
-- ARGV[1] token             ARGV[2] release channel
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
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) == 0 and redis.call('GET', KEYS[3]) == '=Semaphore' then
  redis.call('DEL', KEYS[3])
end
if tonumber(score) <= now then
  return 0
end
return 1 + redis.call('PUBLISH', ARGV[2], 'released')
