-- reentrant_refresh: extend a reentrant lock to at least a full TTL from
-- now if the owner holds it. It never shortens the expiry: another hold of
-- the owner, with a longer TTL, may have set it.
-- KEYS[1] lock hash         ARGV[1] owner          ARGV[2] TTL in milliseconds
-- Returns 1 when the lock expires no sooner than the TTL from now, 0 when
-- the owner holds nothing here.
if redis.call('TYPE', KEYS[1])['ok'] == 'hash' and redis.call('HEXISTS', KEYS[1], 'o:' .. redis.sha1hex(ARGV[1])) == 1 then -- stored hashed: see reentrant_acquire.lua
  if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
  end
  return 1
end
return 0
