-- epoch_read.sql: since when, in microseconds on the database's clock,
-- the server's identity has been recorded (epoch_note.sql); 0 if it was
-- the first recorded.
SELECT expires_at FROM {{table}} WHERE name = X''
