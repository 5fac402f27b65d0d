-- quorum_acquire: one node's part of a Redlock acquire. Takes the lock if
-- free and reports what the client needs to count this node's vote and to
-- choose the fence, in the same round trip.
-- KEYS[1] lock key    KEYS[2] fence counter    KEYS[3] node epoch (dlock:epoch)
-- ARGV[1] owner token ARGV[2] TTL in ms         ARGV[3] a random epoch id
-- Returns {taken (1 or 0), fence counter, server time in microseconds,
--          epoch age in ms, holder's remaining TTL in ms (0 when taken)}.
-- The epoch hash {id, created} lives as long as the node's data: if it is
-- missing, the node is new or lost its data (a restart without persistence),
-- and its age tells the client how long ago that was noticed.
-- Everything that can fail is read before the first write.
redis.replicate_commands()
local counter = tonumber(redis.call('GET', KEYS[2]) or '0')
if counter == nil then
  return redis.error_reply('DLOCKFENCE dlock fence counter ' .. KEYS[2] .. ' does not hold a number')
end
local created = redis.call('HGET', KEYS[3], 'created')
local t = redis.call('TIME')
local nowus = tonumber(t[1]) * 1000000 + tonumber(t[2])
local nowms = math.floor(nowus / 1000)
if not created then
  redis.call('HSET', KEYS[3], 'id', ARGV[3], 'created', string.format('%.0f', nowms))
  created = nowms
end
local age = nowms - tonumber(created)
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {1, counter, nowus, age, 0}
end
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'string' then
  return redis.error_reply('WRONGTYPE dlock lock key ' .. KEYS[1] .. ' holds a ' .. kind)
end
return {0, counter, nowus, age, redis.call('PTTL', KEYS[1])}
