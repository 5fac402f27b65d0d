-- fence.sql: record fence $2 as the newest written to resource $1, unless
-- a higher one has been. It returns $2 when recorded, and no row when
-- stale. The row stays locked until the transaction ends, so that writers
-- of one resource take turns.
INSERT INTO {{fences}} AS f (resource, fence)
VALUES ($1, $2)
ON CONFLICT (resource) DO UPDATE
    SET fence = excluded.fence
    WHERE f.fence <= excluded.fence
RETURNING f.fence;
