-- session_get.sql: on a session-mode lease's connection, take GET_LOCK
-- lock ?1, waiting up to ?2 seconds for another session to release it
-- (0: not at all), and read the connection's ID and wait_timeout (to
-- restore on release). GET_LOCK returns 1 if taken (or already this
-- session's), 0 if another session held it throughout, NULL on an error.
SELECT GET_LOCK(?, ?), CONNECTION_ID(), @@SESSION.wait_timeout
