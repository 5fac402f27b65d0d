-- inspect: what an operator wants to know about one lock name, for every
-- kind of lock: who holds it, how long for, the fence counter, waiters and
-- permits. Reads only; keys of an unexpected type are reported, not read.
-- KEYS[1] lock (the name's main key)   KEYS[2] fence counter (of the slot)
-- KEYS[3] fair queue   KEYS[4] permits   KEYS[5] permit limit
-- KEYS[6] writer   KEYS[7] readers   KEYS[8] waiting writers' intents
-- KEYS[9] a Mutex's line of waiting clients
-- Returns {holder kind ('' when free), pttl, fence, waiters (a fair queue's
-- length plus the writers waiting), permits in use, permit limit, writer,
-- writer pttl, readers, {reader tokens}, {permit tokens}, owner1, holds1,
-- owner2, holds2, ...}; at most 1000 readers, permits and owners are listed.
local function kind(k) return redis.call('TYPE', k)['ok'] end
-- Values are sent at most 256 bytes long (and '...'), strings, hash fields
-- and set members alike: a key that something else wrote may be huge, and
-- an operator's terminal needs only its start. So the reply stays within
-- about 3 x 1000 x 259 bytes, whatever the keys hold.
local function cut(s)
  if #s > 256 then return string.sub(s, 1, 256) .. '...' end
  return s
end
local function get(k)
  if redis.call('STRLEN', k) > 256 then return redis.call('GETRANGE', k, 0, 255) .. '...' end
  return redis.call('GET', k)
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lock = kind(KEYS[1])
local out = {dlock_holder(KEYS[1]) or '', redis.call('PTTL', KEYS[1]), '', 0, 0, '', '', -2, 0, {}, {}}
local function live(k)
  local members = redis.call('ZRANGEBYSCORE', k, '(' .. now, '+inf', 'LIMIT', 0, 1000)
  for i = 1, #members do members[i] = cut(members[i]) end
  return members
end
if kind(KEYS[2]) == 'string' then out[3] = get(KEYS[2]) end
if kind(KEYS[3]) == 'list' then out[4] = redis.call('LLEN', KEYS[3]) end
if KEYS[9] and kind(KEYS[9]) == 'zset' then out[4] = out[4] + redis.call('ZCARD', KEYS[9]) end
if KEYS[8] and kind(KEYS[8]) == 'zset' then out[4] = out[4] + redis.call('ZCOUNT', KEYS[8], '(' .. now, '+inf') end
if kind(KEYS[4]) == 'zset' then
  out[5] = redis.call('ZCOUNT', KEYS[4], '(' .. now, '+inf')
  out[11] = live(KEYS[4])
end
if kind(KEYS[5]) == 'string' then out[6] = get(KEYS[5]) end
if kind(KEYS[6]) == 'string' then
  out[7] = get(KEYS[6])
  out[8] = redis.call('PTTL', KEYS[6])
end
if kind(KEYS[7]) == 'zset' then
  out[9] = redis.call('ZCOUNT', KEYS[7], '(' .. now, '+inf')
  out[10] = live(KEYS[7])
end
if out[1] == 'Mutex' or out[1] == 'FairMutex' then
  local owner = get(KEYS[1])
  if string.sub(owner, -1) == '\1' then owner = string.sub(owner, 1, -2) end -- a waiter's mark (see acquire.lua)
  table.insert(out, owner)
  table.insert(out, '1')
elseif lock == 'hash' then
  local fields = redis.call('HSCAN', KEYS[1], 0, 'MATCH', 'o:*', 'COUNT', 1000)[2] -- at most ~1000 owners shown
  for i = 1, #fields, 2 do
    if string.sub(fields[i], 1, 2) == 'o:' then
      table.insert(out, cut(string.sub(fields[i], 3)))
      table.insert(out, string.sub(fields[i + 1], 1, 256))
    end
  end
end
return out
