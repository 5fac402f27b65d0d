-- session_unlock.sql: on the lease's own connection, after release.sql:
-- let go of GET_LOCK lock ?1 and restore the session's wait_timeout to ?2
-- seconds, in one statement.
SET SESSION wait_timeout = ?2, @dlock_unlocked = RELEASE_LOCK(?1)
