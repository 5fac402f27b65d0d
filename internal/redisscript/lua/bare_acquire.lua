-- bare_acquire: take a free lock in the bare-key layout, the one of
-- bsm/redislock, redsync, redis-py's Lock and node-redlock (SET key token
-- NX PX ttl), and draw a fence from the counter of the key's slot.
-- KEYS[1] the bare lock key   KEYS[2] fence counter (of KEYS[1]'s slot)
-- ARGV[1] owner token         ARGV[2] TTL in milliseconds
-- (Further ARGV, which acquire.lua reads, are ignored.)
-- Returns the new fence (> 0) when the lock was taken, or minus the
-- holder's remaining TTL in milliseconds (<= 0) when another owner holds
-- it; a holder whose key has no expiry (redis-py's Lock without a
-- timeout) is reported as -86400000 (a day), so that a waiter polls.
-- The value is the token alone, and the script never writes another
-- owner's value: the other libraries release by comparing it with their
-- own token. A key of another Redis type is refused with WRONGTYPE.
-- Sent twice, the second copy finds the key holding this token (the first
-- copy took it): it takes it again, drawing a new fence, which is larger
-- than the first copy's, so the caller gets the lock and not a key that
-- blocks every owner until it expires. The fence is drawn as in
-- acquire.lua: the server's TIME in microseconds, or the counter plus one
-- when the counter is not behind the clock; the counter never goes down.
local function fence()
  local t = redis.call('TIME')
  local f = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local arg = f
  if f >= 1e17 then arg = string.format('%.0f', f) end
  local was = redis.pcall('SET', KEYS[2], arg, 'KEEPTTL', 'GET')
  if type(was) == 'table' and was.err then -- nothing was written
    return nil, was.err
  end
  if was then
    local n = string.match(was, '^-?%d+$') and tonumber(was)
    if not n then -- put it back as it was
      redis.call('SET', KEYS[2], was, 'KEEPTTL')
      return nil, 'DLOCKFENCE'
    end
    if n >= f then -- not behind the clock: count on from it
      f = n + 1
      redis.call('SET', KEYS[2], string.format('%.0f', f), 'KEEPTTL')
    end
  end
  return f
end
local function grant()
  local f, err = fence()
  if f then return f end
  redis.call('DEL', KEYS[1])
  if string.find(err, 'WRONGTYPE') then
    return redis.error_reply(err)
  end
  return redis.error_reply('DLOCKFENCE dlock fence counter ' .. KEYS[2] .. ' does not hold a number')
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return grant()
end
local holder = redis.pcall('GET', KEYS[1])
if type(holder) ~= 'string' then
  local kind = redis.call('TYPE', KEYS[1])['ok']
  return redis.error_reply('WRONGTYPE lock key ' .. KEYS[1] .. ' holds a ' .. kind .. ', not a lock of the bare-key layout')
end
local pttl = redis.call('PTTL', KEYS[1])
if holder == ARGV[1] then -- this request's first copy took it
  if pttl < 0 then -- cannot happen: the first copy set PX
    return redis.error_reply('DLOCKNOTTL lock key ' .. KEYS[1] .. ' holds this token without an expiry')
  end
  return grant()
end
if pttl < 0 then
  return -86400000
end
return -pttl
