-- acquire.sql: take the lease-mode lock $1 for owner token $2 for $3
-- milliseconds, if its row is missing, free or expired, on the database's
-- clock. $4 is the fence sequence. One row comes back: (fence, 0) when
-- taken; (0, the holder's remaining milliseconds) when held. No row: held
-- by a grant committed after this statement began.
--
-- On a taken-over row the fence is drawn after the row lock is held, so
-- it exceeds the previous holder's, which was drawn before that holder's
-- grant committed.
WITH won AS (
    INSERT INTO {{table}} AS l (name, token, fence, expires_at)
    VALUES ($1, $2, nextval($4::text::regclass), now() + $3::bigint * interval '1 millisecond')
    ON CONFLICT (name) DO UPDATE
        SET token      = excluded.token,
            fence      = greatest(nextval($4::text::regclass), l.fence + 1),
            expires_at = excluded.expires_at
        WHERE l.expires_at <= now()
    RETURNING l.fence
)
SELECT fence, 0::bigint FROM won
UNION ALL
SELECT 0, greatest(ceil(extract(epoch FROM greatest(h.expires_at, now()) - now()) * 1000), 1)::bigint
FROM {{table}} h
WHERE h.name = $1 AND NOT EXISTS (SELECT FROM won);
