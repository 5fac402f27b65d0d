-- elect_publish.sql: record $3 as the leader of election $1 while owner
-- token $2 holds its row, and notify channel $4 with the name. One row is
-- affected if it did.
UPDATE {{table}}
SET leader = $3
WHERE name = $1 AND token = $2 AND expires_at > now()
RETURNING pg_notify($4, name)::text;
