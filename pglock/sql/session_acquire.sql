-- session_acquire.sql: take lock $1 in session mode for owner token $2
-- for $3 milliseconds: this session's advisory lock $5, and the lock's
-- row, as acquire.sql takes it (same fence, from sequence $4, and the same
-- restart windows, $7 and $8, as acquire.sql's $5 and $6); and set the
-- session's idle_session_timeout to $6, so that the database ends the
-- session when its holder falls silent. ensure.sql has run before it, in
-- the same transaction. If either the advisory lock or the row is held, or
-- the server is within a restart window, it takes neither: an advisory
-- lock it took is unlocked again.
--
-- One row: (the fence, or NULL when not taken; this backend's PID; the
-- idle_session_timeout to restore on release; the row holder's remaining
-- milliseconds, or NULL if the row is free; the milliseconds until the
-- server grants again, or 0). The advisory lock is tried first, once (a
-- CTE used twice is evaluated once), before the UPDATE can lock the row;
-- the outer query's last column runs after the UPDATE, whose result it
-- needs.
WITH adv AS MATERIALIZED (
    SELECT pg_try_advisory_lock($5::bigint) AS got,
           current_setting('idle_session_timeout') AS before
),
server AS MATERIALIZED (
    SELECT s.system_identifier::text || '/' ||
           CASE WHEN pg_is_in_recovery() THEN 'recovery'
                ELSE substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) END AS id,
           pg_postmaster_start_time() AS started
    FROM pg_control_system() s
    WHERE $7::bigint > 0 OR $8::bigint > 0
),
seen AS (
    SELECT s.id, s.started, e.token AS was, e.expires_at AS since
    FROM server s LEFT JOIN {{table}} e ON e.name = ''
),
noted AS (
    INSERT INTO {{table}} AS e (name, token, fence, expires_at)
    SELECT '', id, 0, CASE WHEN was IS NULL THEN '-infinity'::timestamptz ELSE now() END
    FROM seen WHERE $7::bigint > 0 AND was IS DISTINCT FROM id
    ON CONFLICT (name) DO UPDATE SET token = excluded.token, expires_at = excluded.expires_at
        WHERE e.token <> excluded.token
),
wait AS (
    SELECT greatest(
        CASE WHEN $7::bigint <= 0 OR was IS NULL THEN 0
             WHEN was <> id THEN $7::bigint
             WHEN isfinite(since) THEN ceil(extract(epoch FROM since - now()) * 1000 + $7::bigint)
             ELSE 0 END,
        CASE WHEN $8::bigint <= 0 THEN 0
             ELSE ceil(extract(epoch FROM started - now()) * 1000 + $8::bigint) END,
        0)::bigint AS ms
    FROM seen
),
won AS (
    UPDATE {{table}} AS l
    SET token      = $2::text,
        fence      = greatest(nextval($4::text::regclass), l.fence + 1,
                              (extract(epoch FROM clock_timestamp()) * 1000000)::bigint),
        expires_at = now() + $3::bigint * interval '1 millisecond'
    FROM adv
    WHERE adv.got AND l.name = $1::text AND l.expires_at <= now()
      AND NOT EXISTS (SELECT FROM wait WHERE ms > 0)
    RETURNING l.fence
)
SELECT w.fence, pg_backend_pid(), a.before,
       (SELECT greatest(ceil(extract(epoch FROM h.expires_at - now()) * 1000), 1)::bigint
        FROM {{table}} h WHERE h.name = $1 AND h.expires_at > now()),
       CASE WHEN w.fence IS NOT NULL THEN set_config('idle_session_timeout', $6::text, false)
            WHEN a.got THEN pg_advisory_unlock($5)::text
       END,
       coalesce((SELECT ms FROM wait), 0)
FROM adv a LEFT JOIN won w ON true;
