-- release.sql: free the row of lock $1 if owner token $2 holds it, and
-- notify channel $3 with the lock's name. One row is affected if it did.
-- Lease mode releases with it; either mode frees with it, in the
-- background, a row that an interrupted statement may have taken.
UPDATE {{table}}
SET token = '', expires_at = '-infinity'
WHERE name = $1 AND token = $2
RETURNING pg_notify($3, name)::text;
