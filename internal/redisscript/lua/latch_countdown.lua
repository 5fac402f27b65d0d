-- latch_countdown: count a count-down latch down by one; at zero delete it
-- and wake the waiters.
-- KEYS[1] count             ARGV[1] zero channel
-- KEYS[2] this request's record: its outcome, kept so that the request,
--         sent again, counts nothing and returns the same
-- ARGV[2] the latch's life in ms: a count left is kept that long again
-- ARGV[3] how long to keep the record, in ms
-- Returns the count left. A latch that is not counting (no key, or a count
-- of zero) is left alone and 0 returned.
-- Every outcome is recorded, "not counting" and a refusal too: a copy of
-- the request that arrives late, after a later copy was answered, must not
-- change what the caller was told (nothing counted, then the latch set
-- again by another client, then the late copy counting it down).
local done = redis.call('GET', KEYS[2])
if done then
  if string.sub(done, 1, 1) == '!' then
    return redis.error_reply(string.sub(done, 2))
  end
  return tonumber(done)
end
local function refuse(msg)
  redis.call('SET', KEYS[2], '!' .. msg, 'PX', ARGV[3])
  return redis.error_reply(msg)
end
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'none' then
  redis.call('SET', KEYS[2], 0, 'PX', ARGV[3])
  return 0
end
if kind ~= 'string' then
  return refuse('WRONGTYPE dlock latch key ' .. KEYS[1] .. ' holds a ' .. kind)
end
local raw = redis.call('GET', KEYS[1])
local n = tonumber(raw)
if not n or n < 0 or n ~= math.floor(n) then
  return refuse('DLOCKCOUNT dlock latch key ' .. KEYS[1] .. ' holds "' .. raw .. '", not a whole number >= 0')
end
if n == 0 then
  redis.call('SET', KEYS[2], 0, 'PX', ARGV[3])
  return 0
end
n = redis.call('DECR', KEYS[1])
redis.call('SET', KEYS[2], n, 'PX', ARGV[3])
if n == 0 then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[1], 'zero')
else
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return n
