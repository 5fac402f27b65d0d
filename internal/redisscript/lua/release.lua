-- release: delete the lock if this owner holds it, and wake waiters.
-- KEYS[1] lock key          ARGV[1] owner token    ARGV[2] release channel
-- KEYS[2] the waiting clients (optional; see acquire.lua)
-- ARGV[3] unused (a reentrant hold id)
-- ARGV[4] with KEYS[2]: the prefix of the clients' own channels
-- Returns 1 plus the number of subscribers woken when released, 0 when the
-- key is absent or held by another owner. The value is the token, or the
-- token and the mark (byte 1) once an acquire found it held (see
-- acquire.lua): only then
-- is the release published, so an uncontended release runs two commands.
-- With KEYS[2], the notice goes to one client: the one that has waited
-- longest, taken out of KEYS[2], on the channel ARGV[4] .. its id. A client
-- that no longer listens (PUBLISH reached no one) is passed over, up to
-- three clients; if the one reached has no waiter left, or a Cluster node
-- counted only its own subscribers, the others find the lock free at their
-- next poll. Sent twice, the second run finds the key gone or another
-- owner's, and does nothing.
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
if v == ARGV[1] .. '\1' then
  redis.call('DEL', KEYS[1])
  if KEYS[2] then
    return 1 + dlock_wake_next(KEYS[2], ARGV[4])
  end
  return 1 + redis.call('PUBLISH', ARGV[2], 'released')
end
return 0
