-- session_keep.sql: on a session-mode lease's connection, once it holds
-- the lock: set the session's wait_timeout to ?1 seconds, the TTL, so
-- that the database ends the session, and its GET_LOCK lock, when its
-- holder falls silent that long.
SET SESSION wait_timeout = ?
