-- force_unlock.sql: an operator's override: free the row of lock $1
-- whoever holds it, and notify channel $2 with the lock's name. One row is
-- affected if the row was held. Client.ForceUnlock first ends the session
-- that holds the lock's advisory lock, if any (terminate.sql).
UPDATE {{table}}
SET token = '', expires_at = '-infinity'
WHERE name = $1 AND token <> '' AND expires_at > now()
RETURNING pg_notify($2, name)::text;
