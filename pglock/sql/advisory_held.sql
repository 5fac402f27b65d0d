-- advisory_held.sql: whether a session holds advisory lock $1 (a
-- SessionMutex's); Client.ForceUnlock waits, after terminate.sql, until
-- none does.
SELECT EXISTS (SELECT FROM pg_locks k
               WHERE k.locktype = 'advisory' AND k.objsubid = 1 AND k.granted
                 AND ((k.classid::bigint << 32) | k.objid::bigint) = $1::bigint);
