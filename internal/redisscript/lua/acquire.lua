-- acquire: take a free lock and bump its fencing counter.
-- KEYS[1] lock key          KEYS[2] fence counter
-- ARGV[1] owner token       ARGV[2] TTL in milliseconds
-- Returns the new fence (> 0) when the lock was taken, or minus the lock's
-- remaining TTL in milliseconds (<= 0) when another owner holds it.
-- The fence is max(counter + 1, server TIME in microseconds), so fences keep
-- increasing across a restart that lost the counter.
-- Scripts are not rolled back on error, so everything that can fail (a
-- counter of the wrong type) is read before the first write.
redis.replicate_commands()
local counter = tonumber(redis.call('GET', KEYS[2]) or '0')
if counter == nil then
  return redis.error_reply('DLOCKFENCE dlock fence counter ' .. KEYS[2] .. ' does not hold a number')
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local fence = counter + 1
  if now > fence then fence = now end
  redis.call('SET', KEYS[2], string.format('%.0f', fence))
  return fence
end
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'string' then
  return redis.error_reply('WRONGTYPE dlock lock key ' .. KEYS[1] .. ' holds a ' .. kind)
end
local pttl = redis.call('PTTL', KEYS[1])
if pttl < 0 then
  return redis.error_reply('DLOCKNOTTL dlock lock key ' .. KEYS[1] .. ' exists without an expiry: it was not set by dlock')
end
return -pttl
