-- elect_withdraw.sql: delete the leader record of election ?1 if owner
-- token ?2 wrote it.
DELETE FROM {{leaders}} WHERE name = ? AND token = ?
