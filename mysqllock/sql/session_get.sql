-- session_get.sql: on a session-mode lease's connection, try GET_LOCK
-- lock ?1 without waiting, and read the connection's ID and wait_timeout
-- (to restore on release). GET_LOCK returns 1 if taken (or already this
-- session's), 0 if another session holds it, NULL on an error.
SELECT GET_LOCK(?, 0), CONNECTION_ID(), @@SESSION.wait_timeout
