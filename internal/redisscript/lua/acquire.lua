-- acquire: take a free lock and bump its fencing counter.
-- KEYS[1] lock key          KEYS[2] fence counter
-- ARGV[1] owner token       ARGV[2] TTL in milliseconds
-- Returns the new fence (> 0) when the lock was taken, or minus the lock's
-- remaining TTL in milliseconds (<= 0) when another owner holds it.
-- The fence is the counter plus one; a missing counter (a new lock name, or
-- a restart that lost the data) starts again from the server's TIME in
-- microseconds, so fences keep increasing across such a loss.
-- Redis does not roll scripts back: if the counter cannot be used, the lock
-- key set just before is deleted again before the error is returned.
redis.replicate_commands()
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local fence = redis.pcall('INCR', KEYS[2])
  if type(fence) == 'table' and fence.err then
    redis.call('DEL', KEYS[1])
    if string.find(fence.err, 'WRONGTYPE') then
      return redis.error_reply(fence.err)
    end
    return redis.error_reply('DLOCKFENCE dlock fence counter ' .. KEYS[2] .. ' does not hold a number')
  end
  if fence == 1 then
    local t = redis.call('TIME')
    fence = tonumber(t[1]) * 1000000 + tonumber(t[2])
    redis.call('SET', KEYS[2], string.format('%.0f', fence))
  end
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
