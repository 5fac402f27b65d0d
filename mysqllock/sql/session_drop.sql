-- session_drop.sql: on a connection whose attempt got GET_LOCK lock ?1
-- but not the row: let go of the GET_LOCK lock, and restore the session's
-- autocommit to ?2, in one statement.
SET SESSION autocommit = ?2, @dlock_dropped = RELEASE_LOCK(?1)
