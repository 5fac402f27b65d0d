-- force_unlock.sql: an operator's override: free the row of lock ?1
-- whoever holds it. One row is affected if it was held.
UPDATE {{table}} SET token = '', expires_at = 0
WHERE name = ? AND token <> '' AND expires_at > {{now}}
