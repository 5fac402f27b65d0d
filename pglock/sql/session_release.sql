-- session_release.sql: on the lease's own connection, free the row of
-- lock $1 if owner token $2 holds it, release this session's advisory
-- lock $3, restore idle_session_timeout to $4, and notify channel $5 with
-- the lock's name if the row was freed. The first column says whether
-- the row was freed, the second whether the advisory lock was held.
WITH freed AS (
    UPDATE {{table}}
    SET token = '', expires_at = '-infinity'
    WHERE name = $1 AND token = $2
    RETURNING pg_notify($5, name)
)
SELECT EXISTS (SELECT FROM freed),
       pg_advisory_unlock($3),
       set_config('idle_session_timeout', $4, false);
