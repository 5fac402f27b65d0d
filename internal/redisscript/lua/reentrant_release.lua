-- reentrant_release: give up one hold of a reentrant lock; the last one
-- deletes the lock and wakes waiters.
-- KEYS[1] lock hash         ARGV[1] owner          ARGV[2] release channel
-- ARGV[3] the hold to give up
-- KEYS[2] the waiting clients (optional; see acquire.lua)
-- ARGV[4] with KEYS[2]: the prefix of the clients' own channels
-- Returns 0 when the owner holds nothing here, 1 when the hold was given up
-- (or had been, by this call sent before) and others remain, and 1 plus the
-- number of subscribers woken when the lock was deleted: with KEYS[2], the
-- client that has waited longest alone (see release.lua), else every
-- subscriber of ARGV[2].
local owner = 'o:' .. redis.sha1hex(ARGV[1]) -- the owner is stored hashed: see reentrant_acquire.lua
if redis.call('TYPE', KEYS[1])['ok'] ~= 'hash' or redis.call('HEXISTS', KEYS[1], owner) == 0 then
  return 0
end
if redis.call('HDEL', KEYS[1], 'h:' .. ARGV[3]) == 0 then
  return 1
end
if redis.call('HINCRBY', KEYS[1], owner, -1) > 0 then
  return 1
end
redis.call('DEL', KEYS[1])
if KEYS[2] then
  return 1 + dlock_wake_next(KEYS[2], ARGV[4])
end
return 1 + redis.call('PUBLISH', ARGV[2], 'released')
