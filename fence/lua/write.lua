-- write: a fenced write to a user's key, refused if the fence is stale.
-- KEYS[1] the key that holds the fence
-- KEYS[2] the key in which an earlier version kept the fence, read while
--         KEYS[1] does not exist; KEYS[1] again if none
-- KEYS[3] the user's key, absent for Advance
-- ARGV[1] the fence, in decimal without leading zeros
-- ARGV[2] the operation: 'set' (ARGV[4] the value), 'hset' (ARGV[4..] field,
--         value pairs) or 'advance' (record the fence only)
-- ARGV[3] the most the fence may exceed the newest by, in decimal; '' for
--         no bound
-- Returns {1} when written, {0, newest} when the fence is stale, {2, newest}
-- when it exceeds newest by more than ARGV[3], and an error, having written
-- nothing, when KEYS[3] holds another type. Running it twice with the same
-- arguments writes the same, and returns {1} twice: an equal fence passes.
local function higher(a, b) -- a > b for decimals without leading zeros
  if #a ~= #b then return #a > #b end
  return a > b
end
local function add(a, b) -- a + b for decimals without leading zeros
  local out, carry, i, j = {}, 0, #a, #b
  while i > 0 or j > 0 or carry > 0 do
    local d = carry
    if i > 0 then d = d + string.byte(a, i) - 48; i = i - 1 end
    if j > 0 then d = d + string.byte(b, j) - 48; j = j - 1 end
    table.insert(out, 1, string.char(48 + d % 10))
    carry = math.floor(d / 10)
  end
  return table.concat(out)
end
local op = ARGV[2]
if op ~= 'advance' then
  local want = op == 'set' and 'string' or 'hash'
  local t = redis.call('TYPE', KEYS[3])['ok']
  if t ~= 'none' and t ~= want then
    return redis.error_reply('WRONGTYPE ' .. KEYS[3] .. ' holds a ' .. t .. ', not a ' .. want)
  end
end
local newest = redis.call('GET', KEYS[1])
if not newest and KEYS[2] ~= KEYS[1] then newest = redis.call('GET', KEYS[2]) end
if newest and higher(newest, ARGV[1]) then
  return {0, newest}
end
if newest and newest ~= '0' and ARGV[3] ~= '' and higher(ARGV[1], add(newest, ARGV[3])) then
  return {2, newest} -- '0': forgotten by a reset, so no fence yet
end
redis.call('SET', KEYS[1], ARGV[1])
if op == 'set' then
  redis.call('SET', KEYS[3], ARGV[4])
elseif op == 'hset' then
  redis.call('HSET', KEYS[3], unpack(ARGV, 4))
end
return {1}
