-- ensure.sql: make sure lock $1 has a row, free and with fence 0 if it
-- is new, so that the acquire statement after it, in the same
-- transaction, finds a row to lock. A row that exists is neither locked
-- nor written. Both modes run it before their acquire statement, in one
-- round trip.
INSERT INTO {{table}} (name, token, fence, expires_at)
VALUES ($1, '', 0, '-infinity')
ON CONFLICT (name) DO NOTHING;
