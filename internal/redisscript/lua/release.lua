-- release: delete the lock if this owner holds it, and wake waiters.
-- KEYS[1] lock key          ARGV[1] owner token    ARGV[2] release channel
-- Returns 1 plus the number of subscribers woken when released, 0 when the
-- key is absent or held by another owner. The value is the token, or the
-- token and '*' once an acquire found it held (see acquire.lua): only then
-- is the release published, so an uncontended release runs two commands.
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
if v == ARGV[1] .. '*' then
  redis.call('DEL', KEYS[1])
  return 1 + redis.call('PUBLISH', ARGV[2], 'released')
end
return 0
