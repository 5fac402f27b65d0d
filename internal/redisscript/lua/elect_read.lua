-- elect_read: the record of an election's leader, with its lock's value.
-- KEYS[1] the election's lock key   KEYS[2] the leader record
-- Returns {lock value or false, record or false}: the record is the
-- leader's only if its token is the lock's (with or without a waiter's
-- mark, see acquire.lua).
return {redis.call('GET', KEYS[1]), redis.call('GET', KEYS[2])}
