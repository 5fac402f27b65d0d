-- elect_read.sql: the holder's token and the leader record of election $1,
-- if its row is held. The record is the leader's only if it carries the
-- token. No row: no one holds it. Reads only.
SELECT token, coalesce(leader, '')
FROM {{table}}
WHERE name = $1 AND expires_at > now() AND token <> '';
