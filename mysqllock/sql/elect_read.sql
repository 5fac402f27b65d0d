-- elect_read.sql: the holder's token and the leader record of election ?1,
-- if its row in {{table}} is held. The record is the leader's only if it
-- carries the holder's token. No row: no one holds it, or no one has
-- published. Reads only.
SELECT l.token, e.record
FROM {{table}} l JOIN {{leaders}} e ON e.name = l.name
WHERE l.name = ? AND l.token <> X'' AND l.expires_at > {{now}}
