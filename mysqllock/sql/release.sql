-- release.sql: free the row of lock ?1 if owner token ?2 holds it. One row
-- is affected if it did. Lease mode releases with it, and both modes free
-- with it, in the background, a row an interrupted statement may have
-- taken.
UPDATE {{table}} SET token = X'', expires_at = 0 WHERE name = ? AND token = ?
