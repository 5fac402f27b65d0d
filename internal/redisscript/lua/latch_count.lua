-- latch_count: the count of a count-down latch. It writes nothing.
-- KEYS[1] count
-- Returns the count; 0 when the key does not exist (never set, or counted
-- down to zero).
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'none' then
  return 0
end
if kind ~= 'string' then
  return redis.error_reply('WRONGTYPE dlock latch key ' .. KEYS[1] .. ' holds a ' .. kind)
end
local raw = redis.call('GET', KEYS[1])
local n = tonumber(raw)
if not n or n < 0 or n ~= math.floor(n) then
  return redis.error_reply('DLOCKCOUNT dlock latch key ' .. KEYS[1] .. ' holds "' .. raw .. '", not a whole number >= 0')
end
return n
