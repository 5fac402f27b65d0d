-- force_unlock.sql: an operator's override: free the row of lock ?1
-- whoever holds it. One row is affected if it was held.
UPDATE {{table}} SET token = X'', expires_at = 0
WHERE name = ? AND token <> X'' AND expires_at > {{now}}
