-- acquire: take a free lock and bump its fencing counter.
-- KEYS[1] lock key          KEYS[2] fence counter (of the lock's slot)
-- KEYS[3] the waiting clients (optional): a sorted set of client ids,
--         scored by when each began to wait, that release.lua wakes one
--         at a time
-- ARGV[1] owner token       ARGV[2] TTL in milliseconds
-- ARGV[3] unused (a reentrant hold id)
-- ARGV[4] '*' to take the lock already marked as awaited (see below), when
--         the caller has waited and others may still wait
-- ARGV[5] the calling client's id in KEYS[3], or '' not to wait in it
-- ARGV[6] its score there        ARGV[7] how long its place is kept, in ms
-- ARGV[8] when the lock is taken: 'stay' to stay in KEYS[3] (the client
--         has other waiters of the lock), 'leave' to leave it, or ''
-- Returns the new fence (> 0) when the lock was taken, or minus the lock's
-- remaining TTL in milliseconds (<= 0) when another owner holds it. An
-- error DLOCKKIND says another kind of lock holds the name.
-- The fence is the server's TIME in microseconds, or the counter plus one
-- when the counter is not behind the clock (two grants in one microsecond,
-- or a clock stepped back): the counter never goes down, whatever the
-- clock does. Since every grant puts the counter at the clock or above it,
-- a replica promoted after a failover (which takes longer than the
-- replication lag) gives fences above every fence its old master gave;
-- so does a server restarted without its data. One SET ... GET writes the
-- counter and reads what it held (Redis 6.2 or later).
-- Redis does not roll scripts back: if the counter cannot be used, the lock
-- key set just before is deleted again (and the counter put back) before
-- the error is returned.
-- Uncontended, it runs three commands: SET, TIME and SET ... GET. A
-- failed attempt marks
-- the holder's value with a trailing byte 1 (once), so that the holder's
-- release publishes a notice only when someone may be waiting for it, and,
-- given ARGV[5], puts the client in KEYS[3], so that the notice goes to
-- one waiting client, not to all. KEYS[3] is kept at least ARGV[7] ms
-- after the client joined, and no client's attempt shortens it (see
-- dlock_join): it goes once the longest-lived place in it has expired.
-- The mark is a control character, which no token holds (a label's are
-- replaced, see dlock.WithLabel), so that no label looks like it: a
-- holder labelled "...*" once looked marked when '*' was the mark, and
-- its release woke no one.
local mark = '\1'
if redis.call('SET', KEYS[1], ARGV[1] .. (ARGV[4] == '*' and mark or ''), 'NX', 'PX', ARGV[2]) then
  local t = redis.call('TIME')
  local fence = tonumber(t[1]) * 1000000 + tonumber(t[2])
  -- Redis writes a number argument with "%.17g": below 10^17 (the clock
  -- until the year 5138) that is the integer's digits, as string.format
  -- '%.0f' writes them, but without formatting a string in Lua, which
  -- cost more than the TIME and SET ... GET it serves.
  local arg = fence
  if fence >= 1e17 then arg = string.format('%.0f', fence) end
  local was = redis.pcall('SET', KEYS[2], arg, 'KEEPTTL', 'GET')
  if type(was) == 'table' and was.err then -- not a string: nothing was written
    redis.call('DEL', KEYS[1])
    if string.find(was.err, 'WRONGTYPE') then
      return redis.error_reply(was.err)
    end
    return redis.error_reply('DLOCKFENCE dlock fence counter ' .. KEYS[2] .. ' does not hold a number')
  end
  if was then
    local n = string.match(was, '^-?%d+$') and tonumber(was) -- what INCR would take
    if not n then -- put it back as it was
      redis.call('SET', KEYS[2], was, 'KEEPTTL')
      redis.call('DEL', KEYS[1])
      return redis.error_reply('DLOCKFENCE dlock fence counter ' .. KEYS[2] .. ' does not hold a number')
    end
    if n >= fence then -- not behind the clock: count on from it
      fence = n + 1
      redis.call('SET', KEYS[2], string.format('%.0f', fence), 'KEEPTTL')
    end
  end
  if ARGV[8] == 'stay' then
    dlock_join(KEYS[3], ARGV[5], ARGV[6], ARGV[7])
  elseif ARGV[8] == 'leave' then
    redis.call('ZREM', KEYS[3], ARGV[5])
  end
  return fence
end
local holder = redis.pcall('GET', KEYS[1])
if type(holder) == 'table' then -- not a string: a ReentrantMutex, or not dlock's
  local kind = redis.call('TYPE', KEYS[1])['ok']
  if kind == 'hash' and redis.call('HEXISTS', KEYS[1], 'fence') == 1 then
    return redis.error_reply('DLOCKKIND the name is held by a ReentrantMutex')
  end
  return redis.error_reply('WRONGTYPE dlock lock key ' .. KEYS[1] .. ' holds a ' .. kind)
end
if string.sub(holder, 1, 1) == '=' then
  local e = string.find(holder, '=', 2, true)
  return redis.error_reply('DLOCKKIND the name is held by a ' .. string.sub(holder, 2, (e or 0) - 1))
end
local pttl = redis.call('PTTL', KEYS[1])
if pttl < 0 then
  return redis.error_reply('DLOCKNOTTL dlock lock key ' .. KEYS[1] .. ' exists without an expiry: it was not set by dlock')
end
-- The same request sent twice finds its own token: it neither marks the
-- lock nor waits for it.
local own = holder == ARGV[1] or holder == ARGV[1] .. mark
if pttl > 0 and not own and string.sub(holder, -1) ~= mark then -- tell the holder's release that someone waits
  redis.call('SET', KEYS[1], holder .. mark, 'XX', 'PX', pttl)
end
if pttl > 0 and not own and KEYS[3] and ARGV[5] and ARGV[5] ~= '' then
  -- Wait in line: NX keeps the place of a client already there, and gives
  -- one that was woken but lost the race its old place back. Every step
  -- here can run twice with the same outcome.
  dlock_join(KEYS[3], ARGV[5], ARGV[6], ARGV[7])
end
return -pttl
