-- pass_turn: wake the next client in a Mutex's line (see release.lua), for
-- a client that was woken but has no waiter left to take the lock.
-- KEYS[1] lock key          KEYS[2] the waiting clients
-- ARGV[1] the prefix of the clients' own channels
-- Returns the number of subscribers woken: 0 when the lock is held (its
-- release wakes the line) or the line is empty. Sent twice, it may wake
-- one more client, which then finds the lock taken and keeps its place.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
return dlock_wake_next(KEYS[2], ARGV[1])
