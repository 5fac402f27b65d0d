-- elect_withdraw: delete a resigning leader's record, and tell observers.
-- KEYS[1] the leader record   ARGV[1] the record   ARGV[2] the change channel
-- Returns 1 if the record was deleted, 0 if it was another's or gone.
local n = 0
if redis.call('GET', KEYS[1]) == ARGV[1] then
  n = redis.call('DEL', KEYS[1])
end
redis.call('PUBLISH', ARGV[2], 'resigned')
return n
