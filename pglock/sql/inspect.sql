-- inspect.sql: what an operator wants to know about lock $1: its row's
-- owner token, the fence of its latest grant and the milliseconds left
-- before it expires (0 if it has), on the database's clock; and the
-- backend that holds its advisory lock $2 in session mode, or 0. No row:
-- the name was never locked. Reads only. The token is cut to 256
-- characters and '...': a row another writer changed may hold a huge one,
-- and an operator needs only its start.
SELECT CASE WHEN char_length(l.token) > 256 THEN left(l.token, 256) || '...' ELSE l.token END,
       l.fence,
       CASE WHEN l.expires_at > now()
            THEN ceil(extract(epoch FROM l.expires_at - now()) * 1000)::bigint
            ELSE 0 END, -- a freed row's expiry is -infinity
       coalesce((SELECT k.pid FROM pg_locks k
                 WHERE k.locktype = 'advisory' AND k.objsubid = 1 AND k.granted
                   AND ((k.classid::bigint << 32) | k.objid::bigint) = $2::bigint
                 LIMIT 1), 0)
FROM {{table}} l
WHERE l.name = $1;
