-- semaphore_available: the number of free permits of a semaphore. It
-- writes nothing.
-- KEYS[1] permits (sorted set)  KEYS[2] limit
-- ARGV[1] the permits the caller was configured with: the limit when
--         KEYS[2] does not exist
-- Returns the limit less the permits that have not expired; negative when
-- the limit was lowered below the permits still held.
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'none' and kind ~= 'zset' then
  return redis.error_reply('WRONGTYPE dlock semaphore key ' .. KEYS[1] .. ' holds a ' .. kind)
end
kind = redis.call('TYPE', KEYS[2])['ok']
local limit = tonumber(ARGV[1])
if kind == 'string' then
  local raw = redis.call('GET', KEYS[2])
  limit = tonumber(raw)
  if not limit or limit < 1 or limit ~= math.floor(limit) then
    return redis.error_reply('DLOCKLIMIT dlock semaphore limit ' .. KEYS[2] .. ' holds "' .. raw .. '", not a whole number >= 1')
  end
elseif kind ~= 'none' then
  return redis.error_reply('WRONGTYPE dlock semaphore limit key ' .. KEYS[2] .. ' holds a ' .. kind)
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return limit - redis.call('ZCOUNT', KEYS[1], '(' .. string.format('%.0f', now), '+inf')
