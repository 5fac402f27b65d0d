-- quorum_acquire: one node's part of a Redlock acquire. Takes the lock if
-- free and reports what the client needs to count this node's vote and to
-- choose the fence, in the same round trip.
-- KEYS[1] lock key    KEYS[2] fence counter (of the lock's slot)
-- KEYS[3] node epoch (dlock:epoch)
-- ARGV[1] owner token ARGV[2] TTL in ms
-- ARGV[3] restart window in ms, or 0 when restart detection is off
-- Returns {taken (1 or 0), fence counter, server time in microseconds,
--          uptime in ms (a lower bound; -1 when detection is off),
--          epoch age in ms (-1 when detection is off),
--          holder's remaining TTL in ms (0 when taken)}.
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
-- snapshot.
-- Everything that can fail is read before the first write.
redis.replicate_commands()
local counter = tonumber(redis.call('GET', KEYS[2]) or '0')
if counter == nil then
  return redis.error_reply('DLOCKFENCE dlock fence counter ' .. KEYS[2] .. ' does not hold a number')
end
local window = tonumber(ARGV[3])
if not window then
  return redis.error_reply('ERR quorum_acquire: the restart window ' .. tostring(ARGV[3]) .. ' is not a number')
end
local t = redis.call('TIME')
local nows = tonumber(t[1])
local nowus = nows * 1000000 + tonumber(t[2])
local nowms = math.floor(nowus / 1000)
local up, age, boot = -1, -1, 0
if window > 0 then
  local saved = redis.pcall('LASTSAVE')
  if type(saved) ~= 'number' then
    return redis.error_reply('DLOCKINFO LASTSAVE refused: ' .. tostring(saved.err))
  end
  local e = redis.call('HMGET', KEYS[3], 'created', 'seen', 'boot')
  local created = tonumber(e[1])
  boot = tonumber(e[3])
  local set = {}
  if not created then
    created = nowms
    set = {'created', string.format('%.0f', nowms)}
  end
  if e[2] ~= tostring(saved) or not boot then
    local info = redis.pcall('INFO', 'server')
    if type(info) ~= 'string' then
      return redis.error_reply('DLOCKINFO INFO refused: ' .. tostring(info.err))
    end
    local uptime = tonumber(string.match(info, 'uptime_in_seconds:(%d+)'))
    if not uptime then
      return redis.error_reply('DLOCKINFO INFO server has no uptime_in_seconds')
    end
    boot = (nows - uptime + 1) * 1000
    local seen = ''
    if saved <= nows - 2 then
      seen = tostring(saved)
    end
    table.insert(set, 'boot')
    table.insert(set, string.format('%.0f', boot))
    table.insert(set, 'seen')
    table.insert(set, seen)
  end
  if #set > 0 then
    redis.call('HSET', KEYS[3], unpack(set))
  end
  up = math.max(nowms - boot, 0)
  age = nowms - created
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {1, counter, nowus, up, age, 0}
end
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'string' then
  return redis.error_reply('WRONGTYPE dlock lock key ' .. KEYS[1] .. ' holds a ' .. kind)
end
return {0, counter, nowus, up, age, redis.call('PTTL', KEYS[1])}
