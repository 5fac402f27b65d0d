-- release.sql: free the lease-mode lock $1 if owner token $2 holds it, and
-- notify channel $3 with the lock's name. One row is affected if it did.
UPDATE {{table}}
SET token = '', expires_at = '-infinity'
WHERE name = $1 AND token = $2
RETURNING pg_notify($3, name)::text;
