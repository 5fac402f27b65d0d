-- elect_publish.sql: record the first argument as the leader of election
-- ?2 if owner token ?3 holds its row in {{table}}, unexpired. One row is
-- affected when it was inserted, two when it replaced another leader's:
-- none means the token does not hold the row.
INSERT INTO {{leaders}} (name, token, record)
SELECT l.name, l.token, ? FROM {{table}} l
WHERE l.name = ? AND l.token = ? AND l.expires_at > {{now}}
ON DUPLICATE KEY UPDATE token = VALUES(token), record = VALUES(record)
