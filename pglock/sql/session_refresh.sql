-- session_refresh.sql: on the lease's own connection, extend the row of
-- lock $1, if owner token $2 holds it, to $3 milliseconds from now, on
-- the database's clock. It returns this backend's PID if it did, and no
-- row if the token does not hold it any more. The PID proves that the
-- session which took the advisory lock is alive.
UPDATE {{table}}
SET expires_at = now() + $3::bigint * interval '1 millisecond'
WHERE name = $1 AND token = $2
RETURNING pg_backend_pid();
