-- release: delete the lock if this owner holds it, and wake waiters.
-- KEYS[1] lock key          ARGV[1] owner token    ARGV[2] release channel
-- Returns 1 plus the number of subscribers woken when released, 0 when the
-- key is absent or held by another owner.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1 + redis.call('PUBLISH', ARGV[2], 'released')
end
return 0
