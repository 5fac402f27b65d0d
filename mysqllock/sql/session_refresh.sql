-- session_refresh.sql: on the lease's own connection, extend the row of
-- lock ?1, if owner token ?2 holds it and this session holds GET_LOCK
-- lock ?3, to ?4 microseconds from now. One row is affected if it did.
UPDATE {{table}} SET expires_at = {{now}} + ?4
WHERE name = ?1 AND token = ?2 AND IS_USED_LOCK(?3) = CONNECTION_ID()
