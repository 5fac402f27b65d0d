-- elect_publish: record the leader of an election while it holds the lock.
-- KEYS[1] the election's lock key (a Mutex)   ARGV[1] the leader's token
-- KEYS[2] the leader record                    ARGV[2] the record
-- ARGV[3] the record's life in milliseconds    ARGV[4] the change channel
-- Returns 1 when recorded and published, 0 when the lock is not the token's.
local v = redis.call('GET', KEYS[1])
if v ~= ARGV[1] and v ~= ARGV[1] .. '\1' then return 0 end -- '\1': a waiter's mark (see acquire.lua)
if redis.call('GET', KEYS[2]) ~= ARGV[2] then
  redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
  redis.call('PUBLISH', ARGV[4], 'elected')
else
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
end
return 1
