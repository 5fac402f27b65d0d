-- holder.sql: how long the row of lock ?1 stays held, in microseconds on
-- the database's clock: 0 or less if it is free or expired. No row: the
-- name has never been locked (or its row was deleted).
SELECT expires_at - {{now}} FROM {{table}} WHERE name = ?
