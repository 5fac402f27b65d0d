-- rw_release: give up an RWMutex's write lock or a read share, and wake
-- waiters when the lock became free; the name's marker goes with the last
-- hold.
-- KEYS[1] writer key        KEYS[2] readers (sorted set token -> expiry)
-- KEYS[3] the name's main key (the marker =RWMutex while anything holds)
-- ARGV[1] token             ARGV[2] release channel
-- ARGV[3] 'w' for the write lock, 'r' for a read share
-- Returns 1 plus the number of subscribers woken when it was given up, 0
-- when it had expired or was never held.
redis.replicate_commands()
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local readers = redis.call('TYPE', KEYS[2])['ok'] == 'zset'
if readers then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
end
if ARGV[3] == 'w' then
  if redis.call('GET', KEYS[1]) ~= ARGV[1] then
    return 0
  end
  redis.call('DEL', KEYS[1])
else
  if not readers or redis.call('ZREM', KEYS[2], ARGV[1]) == 0 then
    return 0
  end
end
if readers and redis.call('ZCARD', KEYS[2]) > 0 then
  return 1
end
if redis.call('EXISTS', KEYS[1]) == 0 and redis.call('GET', KEYS[3]) == '=RWMutex' then
  redis.call('DEL', KEYS[3])
end
return 1 + redis.call('PUBLISH', ARGV[2], 'released')
