-- latch_set: set the count of a count-down latch unless it is counting.
-- KEYS[1] count             ARGV[1] the count (>= 1)
-- ARGV[2] how long the latch lasts, in milliseconds: a latch not counted
--         down to zero by then is gone, and Wait returns
-- Returns 1 when the count was set, 0 when the latch was already counting
-- (its key exists with a count above zero).
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'string' then
  local raw = redis.call('GET', KEYS[1])
  local n = tonumber(raw)
  if not n or n < 0 or n ~= math.floor(n) then
    return redis.error_reply('DLOCKCOUNT dlock latch key ' .. KEYS[1] .. ' holds "' .. raw .. '", not a whole number >= 0')
  end
  if n > 0 then
    return 0
  end
elseif kind ~= 'none' then
  return redis.error_reply('WRONGTYPE dlock latch key ' .. KEYS[1] .. ' holds a ' .. kind)
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
