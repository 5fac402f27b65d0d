-- session_check.sql: on the lease's own connection, whether owner token
-- ?2 holds the row of lock ?1, and whether this session holds GET_LOCK
-- lock ?3; for a refresh that affected no row.
SELECT EXISTS (SELECT 1 FROM {{table}} WHERE name = ?1 AND token = ?2),
       COALESCE(IS_USED_LOCK(?3) = CONNECTION_ID(), 0)
