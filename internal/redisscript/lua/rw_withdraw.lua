-- rw_withdraw: withdraw a waiting writer's intent when it gives up.
-- KEYS[1] writer intents (sorted set token -> expiry)
-- ARGV[1] intent id         ARGV[2] release channel
-- Returns 1 if the intent was there, 0 otherwise. Readers held back by the
-- last intent are woken.
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'zset' then
  return 0
end
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then
  return 0
end
if redis.call('ZCARD', KEYS[1]) == 0 then
  redis.call('PUBLISH', ARGV[2], 'released')
end
return 1
