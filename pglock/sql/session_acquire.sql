-- session_acquire.sql: take lock $1 in session mode for owner token $2
-- for $3 milliseconds: this session's advisory lock $5, and the lock's
-- row, as acquire.sql takes it (same fence, from sequence $4); and set
-- the session's idle_session_timeout to $6, so that the database ends
-- the session when its holder falls silent. ensure.sql has run before
-- it, in the same transaction. If either the advisory lock or the row is
-- held, it takes neither: an advisory lock it took is unlocked again.
--
-- One row: (the fence, or NULL when not taken; this backend's PID; the
-- idle_session_timeout to restore on release; the row holder's remaining
-- milliseconds, or NULL if the row is free). The advisory lock is tried
-- first, once (a CTE used twice is evaluated once), before the UPDATE
-- can lock the row; the outer query's last column runs after the UPDATE,
-- whose result it needs.
WITH adv AS MATERIALIZED (
    SELECT pg_try_advisory_lock($5::bigint) AS got,
           current_setting('idle_session_timeout') AS before
),
won AS (
    UPDATE {{table}} AS l
    SET token      = $2::text,
        fence      = greatest(nextval($4::text::regclass), l.fence + 1,
                              (extract(epoch FROM clock_timestamp()) * 1000000)::bigint),
        expires_at = now() + $3::bigint * interval '1 millisecond'
    FROM adv
    WHERE adv.got AND l.name = $1::text AND l.expires_at <= now()
    RETURNING l.fence
)
SELECT w.fence, pg_backend_pid(), a.before,
       (SELECT greatest(ceil(extract(epoch FROM h.expires_at - now()) * 1000), 1)::bigint
        FROM {{table}} h WHERE h.name = $1 AND h.expires_at > now()),
       CASE WHEN w.fence IS NOT NULL THEN set_config('idle_session_timeout', $6::text, false)
            WHEN a.got THEN pg_advisory_unlock($5)::text
       END
FROM adv a LEFT JOIN won w ON true;
