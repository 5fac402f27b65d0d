-- acquire.sql: take lock $1 in lease mode for owner token $2 for $3
-- milliseconds, if its row is free or expired, on the database's clock.
-- $4 is the fence sequence. ensure.sql has run before it, in the same
-- transaction, so the row exists. One row comes back: (fence, 0) when
-- taken; (0, the holder's remaining milliseconds) when held. No row: the
-- row was deleted behind pglock's back between the two statements.
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
WITH won AS (
    UPDATE {{table}} AS l
    SET token      = $2::text,
        fence      = greatest(nextval($4::text::regclass), l.fence + 1,
                              (extract(epoch FROM clock_timestamp()) * 1000000)::bigint),
        expires_at = now() + $3::bigint * interval '1 millisecond'
    WHERE l.name = $1::text AND l.expires_at <= now()
    RETURNING l.fence
)
SELECT fence, 0::bigint FROM won
UNION ALL
SELECT 0, greatest(ceil(extract(epoch FROM greatest(h.expires_at, now()) - now()) * 1000), 1)::bigint
FROM {{table}} h
WHERE h.name = $1 AND NOT EXISTS (SELECT FROM won);
