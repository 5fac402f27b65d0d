-- inspect.sql: what an operator wants to know about lock ?1: its row's
-- owner token, the fence of its latest grant and the microseconds left
-- before it expires (0 if it has), on the database's clock; and the
-- connection that holds its GET_LOCK lock ?2 in session mode, or 0. No
-- row: the name was never locked. Reads only. The token is cut to 256
-- bytes and '...': the schema's column holds 255, but a table widened by
-- hand may hold a huge one, and an operator needs only its start.
SELECT IF(LENGTH(token) > 256, CONCAT(LEFT(token, 256), '...'), token), fence, GREATEST(expires_at - {{now}}, 0), COALESCE(IS_USED_LOCK(?2), 0)
FROM {{table}} WHERE name = ?1
