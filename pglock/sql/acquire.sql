-- acquire.sql: take the lease-mode lock $1 for owner token $2 for $3
-- milliseconds, if its row is missing, free or expired, on the database's
-- clock. $4 is the fence sequence. One row comes back: (fence, 0) when
-- taken; (0, the holder's remaining milliseconds) when held. No row: held
-- by a grant committed after this statement began.
--
-- The NOT EXISTS keeps an attempt on a lock that is plainly held (in this
-- statement's snapshot) from touching the row: it writes nothing, locks
-- nothing and draws no fence. Otherwise the upsert decides, on the latest
-- version of the row, under its lock. On a taken-over row the fence is
-- drawn once the row is locked, so it exceeds the previous holder's, which
-- was drawn before that holder's grant committed.
WITH won AS (
    INSERT INTO {{table}} AS l (name, token, fence, expires_at)
    SELECT $1::text, $2::text, nextval($4::text::regclass), now() + $3::bigint * interval '1 millisecond'
    WHERE NOT EXISTS (SELECT FROM {{table}} WHERE name = $1 AND expires_at > now())
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
