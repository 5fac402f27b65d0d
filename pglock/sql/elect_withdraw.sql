-- elect_withdraw.sql: clear the leader record $2 of election $1 if it is
-- still there, and notify channel $3 with the name either way. Returns
-- the number of records cleared.
WITH gone AS (
    UPDATE {{table}} SET leader = NULL
    WHERE name = $1 AND leader = $2
    RETURNING 1
)
SELECT pg_notify($3, $1::text), (SELECT count(*) FROM gone);
