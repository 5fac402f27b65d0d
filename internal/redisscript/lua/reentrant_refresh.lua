-- reentrant_refresh: extend a reentrant lock to a full TTL if the owner
-- holds it.
-- KEYS[1] lock hash         ARGV[1] owner          ARGV[2] TTL in milliseconds
-- Returns 1 when extended, 0 when the owner holds nothing here.
if redis.call('TYPE', KEYS[1])['ok'] == 'hash' and redis.call('HEXISTS', KEYS[1], 'o:' .. ARGV[1]) == 1 then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
