-- create.sql: take lock ?1, which has no row yet, for owner token ?2 for
-- ?3 microseconds, by making its row, with the database's clock in
-- microseconds as its fence, which is also the OK packet's insert id, if
-- the clock has reached ?4, the end of the server's restart windows (0 for
-- none). It fails with a duplicate-key error (1062) if another attempt
-- made the row first, and makes none within a window.
INSERT INTO {{table}} (name, token, fence, expires_at)
SELECT ?, ?, LAST_INSERT_ID({{now}}), {{now}} + ? FROM DUAL WHERE {{now}} >= ?
