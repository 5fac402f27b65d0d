-- acquire.sql: take lock $1 in lease mode for owner token $2 for $3
-- milliseconds, if its row is free or expired, on the database's clock,
-- and the server is past its restart windows (below). $4 is the fence
-- sequence. ensure.sql has run before it, in the same transaction, so the
-- row exists. One row comes back: (fence, 0, 0) when taken; (0, the
-- holder's remaining milliseconds, the milliseconds until the server
-- grants again, or 0) when not. No row: the row was deleted behind
-- pglock's back between the two statements.
--
-- An attempt on a lock that is held (in this statement's snapshot) only
-- reads: the UPDATE neither locks nor writes a row its WHERE rejects.
--
-- The fence: the largest of the sequence's next value, the row's last
-- fence plus one, and the database's clock in microseconds, computed
-- from the newest version of the row: if a grant committed a newer one
-- after this statement's snapshot, PostgreSQL waits for it, locks it and
-- evaluates the WHERE and the SET again on it. session_acquire.sql
-- computes it the same way; the package doc says why it only increases.
--
-- The restart windows (see WithRestartWindow): the server grants nothing
-- for $5 milliseconds after the first attempt that finds its identity
-- (system identifier and timeline) not the one recorded in the row named
-- '' (no lock has that name), which it records then, and for $6
-- milliseconds after its postmaster started. 0 turns either off. The
-- first identity ever recorded starts no window.
WITH server AS MATERIALIZED (
    SELECT s.system_identifier::text || '/' ||
           CASE WHEN pg_is_in_recovery() THEN 'recovery'
                ELSE substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) END AS id,
           pg_postmaster_start_time() AS started
    FROM pg_control_system() s
    WHERE $5::bigint > 0 OR $6::bigint > 0
),
seen AS (
    SELECT s.id, s.started, e.token AS was, e.expires_at AS since
    FROM server s LEFT JOIN {{table}} e ON e.name = ''
),
noted AS (
    INSERT INTO {{table}} AS e (name, token, fence, expires_at)
    SELECT '', id, 0, CASE WHEN was IS NULL THEN '-infinity'::timestamptz ELSE now() END
    FROM seen WHERE $5::bigint > 0 AND was IS DISTINCT FROM id
    ON CONFLICT (name) DO UPDATE SET token = excluded.token, expires_at = excluded.expires_at
        WHERE e.token <> excluded.token
),
wait AS (
    SELECT greatest(
        CASE WHEN $5::bigint <= 0 OR was IS NULL THEN 0
             WHEN was <> id THEN $5::bigint
             WHEN isfinite(since) THEN ceil(extract(epoch FROM since - now()) * 1000 + $5::bigint)
             ELSE 0 END,
        CASE WHEN $6::bigint <= 0 THEN 0
             ELSE ceil(extract(epoch FROM started - now()) * 1000 + $6::bigint) END,
        0)::bigint AS ms
    FROM seen
),
won AS (
    UPDATE {{table}} AS l
    SET token      = $2::text,
        fence      = greatest(nextval($4::text::regclass), l.fence + 1,
                              (extract(epoch FROM clock_timestamp()) * 1000000)::bigint),
        expires_at = now() + $3::bigint * interval '1 millisecond'
    WHERE l.name = $1::text AND l.expires_at <= now()
      AND NOT EXISTS (SELECT FROM wait WHERE ms > 0)
    RETURNING l.fence
)
SELECT fence, 0::bigint, 0::bigint FROM won
UNION ALL
SELECT 0, greatest(ceil(extract(epoch FROM greatest(h.expires_at, now()) - now()) * 1000), 1)::bigint,
       coalesce((SELECT ms FROM wait), 0)
FROM {{table}} h
WHERE h.name = $1 AND NOT EXISTS (SELECT FROM won);
