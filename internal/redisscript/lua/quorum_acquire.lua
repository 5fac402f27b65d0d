-- quorum_acquire: one node's part of a Redlock acquire. Takes the lock if
-- free, draws the next value of the fence counter, and reports what the
-- client needs to count this node's vote, in the same round trip.
-- KEYS[1] lock key    KEYS[2] fence counter (of the lock's slot)
-- KEYS[3] node epoch (dlock:epoch)
-- ARGV[1] owner token ARGV[2] TTL in ms
-- ARGV[3] restart window in ms, or 0 when restart detection is off
-- ARGV[4] 1 when the client has seen no counter for the slot yet (a guess:
--         either way the counter ends the same), else 0; optional
-- Returns {taken (1 or 0), fence counter after this acquire (0 when the
--          node has none it may use yet), server time in microseconds
--          (0 when the script did not need the clock),
--          uptime in ms (a lower bound; -1 when detection is off),
--          epoch age in ms (a lower bound; -1 when detection is off),
--          epoch creation in ms on the server's clock (-1 when off)}.
--
-- Restart detection. The epoch hash holds: created, when the node's data
-- began (the first acquire after the data was lost, or ever, made it);
-- boot, the latest time at which the running server can have started,
-- in ms (from INFO server's uptime_in_seconds, whole seconds truncated);
-- seen, the LASTSAVE reading that boot was computed at. LASTSAVE is the
-- server's start time until the first save and the time of the last save
-- after it, so it changes on every restart: while it reads as seen, boot
-- is still this server's, and INFO (costlier) is not called. seen is
-- stored only once LASTSAVE is two seconds old, so that a restart in the
-- same second cannot read the same LASTSAVE as an epoch restored from a
-- snapshot. ripe is the largest restart window the node has been seen to
-- outlast, both its server's uptime and its epoch's age, at the LASTSAVE
-- reading seen (it is cleared whenever boot is computed again): while it
-- holds, the script reports it as both lower bounds and does not read the
-- clock, so that an acquire on a node in service runs LASTSAVE, HMGET,
-- SET and INCR, and nothing else.
--
-- The fence counter is a plain counter, incremented by every acquire that
-- takes the key, so that nodes that saw the same acquires agree and the
-- client need not write a fence back. It is lifted to the server clock,
-- rounded up to 100ms so that nodes with close clocks lift it to the same
-- value, when it is missing, or when it is below the clock reading at the
-- end of the restart window that followed the last boot (a counter
-- restored from an old snapshot) and the window has passed. Within the
-- window a missing counter is not created: the node may not vote yet.
-- Only a lift reads the clock (TIME) and writes the counter (SET). Every
-- lift reads the clock, even on a ripe node: a counter lost while the
-- node keeps running and its epoch (an eviction, a DEL) may have been
-- incremented, or written back, far past any clock reading stored
-- earlier, and only the clock now bounds what it held. When ARGV[4]
-- guesses that the counter is missing, a node that may create it creates
-- it at the lift with SET NX, one command where INCR and a SET would be
-- two; if the counter is there after all, it goes on with INCR, as
-- without the guess. (Not SET NX GET: Redis allows NX with GET only
-- from 7.0, and dlock supports 6.2.)
redis.replicate_commands()
local window = tonumber(ARGV[3])
if not window then
  return redis.error_reply('ERR quorum_acquire: the restart window ' .. tostring(ARGV[3]) .. ' is not a number')
end
local nows, nowus
local function clock()
  if not nowus then
    local t = redis.call('TIME')
    nows = tonumber(t[1])
    nowus = nows * 1000000 + tonumber(t[2])
  end
  return nowus
end
local up, age, created, boot = -1, -1, -1, 0
if window > 0 then
  local saved = redis.pcall('LASTSAVE')
  if type(saved) ~= 'number' then
    return redis.error_reply('DLOCKINFO LASTSAVE refused: ' .. tostring(saved.err))
  end
  local e = redis.call('HMGET', KEYS[3], 'created', 'seen', 'boot', 'ripe')
  created = tonumber(e[1])
  boot = tonumber(e[3])
  local ripe = tonumber(e[4])
  if created and boot and ripe and ripe >= window and e[2] == tostring(saved) then
    up, age = ripe, ripe
  else
    local nowms = math.floor(clock() / 1000)
    local set = {}
    if not created then
      created = nowms
      set = {'created', string.format('%.0f', nowms)}
    end
    local seen = e[2]
    if seen ~= tostring(saved) or not boot then
      local info = redis.pcall('INFO', 'server')
      if type(info) ~= 'string' then
        return redis.error_reply('DLOCKINFO INFO refused: ' .. tostring(info.err))
      end
      local uptime = tonumber(string.match(info, 'uptime_in_seconds:(%d+)'))
      if not uptime then
        return redis.error_reply('DLOCKINFO INFO server has no uptime_in_seconds')
      end
      boot = (nows - uptime + 1) * 1000
      seen = ''
      if saved <= nows - 2 then
        seen = tostring(saved)
      end
      ripe = nil
      for _, v in ipairs({'boot', string.format('%.0f', boot), 'seen', seen, 'ripe', '0'}) do
        table.insert(set, v)
      end
    end
    up = math.max(nowms - boot, 0)
    age = nowms - created
    if seen == tostring(saved) and up >= window and age >= window and (ripe or 0) < window then
      table.insert(set, 'ripe')
      table.insert(set, ARGV[3])
    end
    if #set > 0 then
      redis.call('HSET', KEYS[3], unpack(set))
    end
  end
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local c
  if ARGV[4] == '1' and (window == 0 or up >= window) then
    local lift = math.ceil(clock() / 100000) * 100000
    c = redis.pcall('SET', KEYS[2], string.format('%.0f', lift), 'NX')
    if type(c) == 'table' and c.ok then -- created at the lift
      return {1, lift, nowus, up, age, created}
    end
  end
  if type(c) ~= 'table' then
    c = redis.pcall('INCR', KEYS[2])
  end
  if type(c) == 'table' then
    redis.call('DEL', KEYS[1])
    if string.find(c.err, 'WRONGTYPE') then
      return redis.error_reply(c.err)
    end
    return redis.error_reply('DLOCKFENCE dlock fence counter ' .. KEYS[2] .. ' does not hold a number')
  end
  if c == 1 or (window > 0 and c < (boot + window) * 1000) then
    if window == 0 or up >= window then
      c = math.ceil(clock() / 100000) * 100000
      redis.call('SET', KEYS[2], string.format('%.0f', c))
    elseif c == 1 then
      redis.call('DEL', KEYS[2])
      c = 0
    end
  end
  return {1, c, nowus or 0, up, age, created}
end
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'string' then
  return redis.error_reply('WRONGTYPE dlock lock key ' .. KEYS[1] .. ' holds a ' .. kind)
end
return {0, 0, nowus or 0, up, age, created}
