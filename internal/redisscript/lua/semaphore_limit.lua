-- semaphore_limit: set or change the number of permits of a semaphore, and
-- wake waiters when it grows.
-- KEYS[1] permits (sorted set)  KEYS[2] limit
-- KEYS[3] this request's record: its outcome, kept so that the request,
--         sent again, changes nothing and returns the same
-- ARGV[1] 'set' or 'add'        ARGV[2] the new limit, or the change
-- ARGV[3] the permits the caller was configured with: the current limit
--         when KEYS[2] does not exist
-- ARGV[4] release channel   ARGV[5] the semaphore's TTL in milliseconds
-- ARGV[6] how long to keep the record, in ms
-- The limit expires no sooner than the TTL from now, and with the permits
-- after that: a limit outlives the semaphore's last use by at most a TTL.
-- Returns the new limit. A result below 1 is refused with DLOCKLIMIT and
-- changes nothing.
-- Every outcome is recorded, a refusal too: a copy of the request that
-- arrives late, after a later copy was answered, must not change what the
-- caller was told (a refusal, then a limit raised by another client, then
-- the late copy applying the change after all).
local done = redis.call('GET', KEYS[3])
if done then
  if string.sub(done, 1, 1) == '!' then
    return redis.error_reply(string.sub(done, 2))
  end
  return tonumber(done)
end
local function refuse(msg)
  redis.call('SET', KEYS[3], '!' .. msg, 'PX', ARGV[6])
  return redis.error_reply(msg)
end
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'none' and kind ~= 'zset' then
  return refuse('WRONGTYPE dlock semaphore key ' .. KEYS[1] .. ' holds a ' .. kind)
end
kind = redis.call('TYPE', KEYS[2])['ok']
local old = tonumber(ARGV[3])
if kind == 'string' then
  local raw = redis.call('GET', KEYS[2])
  old = tonumber(raw)
  if not old or old < 1 or old ~= math.floor(old) then
    return refuse('DLOCKLIMIT dlock semaphore limit ' .. KEYS[2] .. ' holds "' .. raw .. '", not a whole number >= 1')
  end
elseif kind ~= 'none' then
  return refuse('WRONGTYPE dlock semaphore limit key ' .. KEYS[2] .. ' holds a ' .. kind)
end
local new = tonumber(ARGV[2])
if ARGV[1] == 'add' then
  new = old + new
end
if new < 1 then
  return refuse('DLOCKLIMIT the limit of ' .. KEYS[2] .. ' would be ' .. string.format('%.0f', new) .. ' (now ' .. string.format('%.0f', old) .. '); it must stay >= 1')
end
redis.call('SET', KEYS[2], string.format('%.0f', new), 'PX', math.max(tonumber(ARGV[5]), redis.call('PTTL', KEYS[2])))
redis.call('SET', KEYS[3], string.format('%.0f', new), 'PX', ARGV[6])
if new > old then
  redis.call('PUBLISH', ARGV[4], 'permits')
end
return new
