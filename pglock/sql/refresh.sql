-- refresh.sql: extend the lease-mode locks $1[i] held by owner tokens
-- $2[i] to $3[i] milliseconds from now, on the database's clock. It
-- returns the name and token of each one still held.
UPDATE {{table}} AS l
SET expires_at = now() + u.ttl * interval '1 millisecond'
FROM unnest($1::text[], $2::text[], $3::bigint[]) AS u (name, token, ttl)
WHERE l.name = u.name AND l.token = u.token
RETURNING l.name, l.token;
