-- leave_line: take a client out of a Mutex's line of waiting clients (see
-- acquire.lua), when its last waiter gave up.
-- KEYS[1] the waiting clients    ARGV[1] the client's id
-- Returns 1 if the client was in the line, else 0. Sent twice, the second
-- run finds it gone.
return redis.call('ZREM', KEYS[1], ARGV[1])
