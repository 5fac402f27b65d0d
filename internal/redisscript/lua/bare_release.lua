-- bare_release: delete a lock of the bare-key layout (see
-- bare_acquire.lua) if this owner holds it, and tell dlock's waiters.
-- KEYS[1] the bare lock key   ARGV[1] owner token   ARGV[2] release channel
-- (A further ARGV, which release.lua does not read either, is ignored.)
-- Returns 1 plus the number of subscribers told when released, 0 when the
-- key is absent or another owner's. The value carries no waiter's mark
-- (the other libraries would not find their token in it), so every
-- release publishes. Sent twice, the second copy finds the key gone or
-- another owner's, and does nothing.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1 + redis.call('PUBLISH', ARGV[2], 'released')
end
return 0
