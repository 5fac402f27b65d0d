-- force_unlock: an operator's override. Deletes every holder of one lock
-- name (the lock, a writer, readers, a writer's intent, permits) and wakes
-- waiters: those of the plain channel, and the head of a fair queue.
-- Holders learn of it at their next renewal (dlock.ErrTakenOver).
-- KEYS[1] lock   KEYS[2] writer   KEYS[3] readers   KEYS[4] writer intent
-- KEYS[5] permits   KEYS[6] fair queue   KEYS[7] a Mutex's waiting clients
-- ARGV[1] release channel   ARGV[2] prefix of a fair waiter's own channel
-- ARGV[3] prefix of a waiting client's own channel (see release.lua)
-- Returns the number of keys deleted.
-- A main key that dlock did not write is left alone: WRONGTYPE.
local holder = dlock_holder(KEYS[1])
if holder and string.sub(holder, 1, 6) == 'Redis ' then
  return dlock_refuse(holder)
end
local n = redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5])
redis.call('PUBLISH', ARGV[1], 'released')
if KEYS[7] and redis.call('TYPE', KEYS[7])['ok'] == 'zset' then
  dlock_wake_next(KEYS[7], ARGV[3])
end
if redis.call('TYPE', KEYS[6])['ok'] == 'list' then
  local head = redis.call('LINDEX', KEYS[6], 0)
  if head then redis.call('PUBLISH', ARGV[2] .. head, 'released') end
end
return n
