-- reentrant_acquire: take a free reentrant lock, or take it again for the
-- owner that holds it. The lock is a hash: o:<owner> -> hold count, h:<hold>
-- -> 1 for each hold, and fence -> the fence of the current owner's first
-- hold.
-- KEYS[1] lock hash         KEYS[2] fence counter (of the lock's slot)
-- ARGV[1] owner             ARGV[2] TTL in milliseconds
-- ARGV[3] hold: a fresh id for this hold, so that the call, sent twice,
--         takes one hold
-- KEYS[3], ARGV[4] to ARGV[8]: the line of waiting clients, as in
--         acquire.lua (ARGV[4] is unused: reentrant_release.lua wakes the
--         line on every last release)
-- Returns the owner's fence (> 0) when taken or re-entered, or minus the
-- lock's remaining TTL in milliseconds (<= 0) when another owner holds it.
-- A new hold bumps the counter as acquire.lua does; a re-entry keeps the
-- fence of the first hold, since the holder has not changed. A re-entry
-- never shortens the lock's expiry: another hold of the owner was promised
-- it. The owner is stored as the SHA-1 of its token: whoever reads the
-- keys (inspect, a replica, a dump) sees only the hash, which cannot
-- be used to join the owner's hold.
-- A failed attempt puts the client in KEYS[3] (given ARGV[5]), and a
-- successful one takes it out or keeps it there as ARGV[8] says, as
-- acquire.lua does.
local function lined(won)
  if won and ARGV[8] == 'stay' or not won and KEYS[3] and ARGV[5] and ARGV[5] ~= '' then
    dlock_join(KEYS[3], ARGV[5], ARGV[6], ARGV[7])
  elseif won and ARGV[8] == 'leave' then
    redis.call('ZREM', KEYS[3], ARGV[5])
  end
end
local owner, hold = 'o:' .. redis.sha1hex(ARGV[1]), 'h:' .. ARGV[3]
local ttl = tonumber(ARGV[2])
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'none' then
  local fence = redis.pcall('INCR', KEYS[2]) -- the only step that can fail, before any write
  if type(fence) == 'table' and fence.err then
    if string.find(fence.err, 'WRONGTYPE') then
      return redis.error_reply(fence.err)
    end
    return redis.error_reply('DLOCKFENCE dlock fence counter ' .. KEYS[2] .. ' does not hold a number')
  end
  local t = redis.call('TIME')
  local clock = tonumber(t[1]) * 1000000 + tonumber(t[2])
  if fence < clock - 100000 then -- lifted to the clock when 100ms behind it
    fence = clock
    redis.call('SET', KEYS[2], string.format('%.0f', fence))
  end
  redis.call('HSET', KEYS[1], owner, 1, hold, 1, 'fence', string.format('%.0f', fence))
  redis.call('PEXPIRE', KEYS[1], ttl)
  lined(true)
  return fence
end
if kind ~= 'hash' then
  return dlock_refuse(dlock_holder(KEYS[1]))
end
if redis.call('HEXISTS', KEYS[1], owner) == 1 then
  if redis.call('HSETNX', KEYS[1], hold, 1) == 1 then
    redis.call('HINCRBY', KEYS[1], owner, 1)
  end
  if redis.call('PTTL', KEYS[1]) < ttl then
    redis.call('PEXPIRE', KEYS[1], ttl)
  end
  lined(true)
  return tonumber(redis.call('HGET', KEYS[1], 'fence'))
end
local pttl = redis.call('PTTL', KEYS[1])
if pttl < 0 then
  return redis.error_reply('DLOCKNOTTL dlock lock key ' .. KEYS[1] .. ' exists without an expiry: it was not set by dlock')
end
if pttl > 0 then
  lined(false)
end
return -pttl
