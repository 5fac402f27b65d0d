-- epoch_note.sql: record the server's identity ?1 (server_id, hostname
-- and port) in the row named '', which no lock can have: as it is if it is
-- the one recorded; with the database's clock in microseconds as its
-- expires_at, the start of the restart window, if another is; with 0, for
-- no window, if none is (the first attempt ever). MySQL assigns left to
-- right: expires_at reads the token before it changes.
INSERT INTO {{table}} (name, token, fence, expires_at) VALUES (X'', ?, 0, 0)
ON DUPLICATE KEY UPDATE expires_at = IF(token = VALUES(token), expires_at, {{now}}),
                        token = VALUES(token)
