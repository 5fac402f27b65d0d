-- terminate.sql: end the sessions, other than this one, that hold
-- advisory lock $1 (a SessionMutex's), for Client.ForceUnlock. One row
-- per session, with whether pg_terminate_backend signalled it; it fails
-- unless the role may signal them (the same role, or pg_signal_backend).
SELECT pg_terminate_backend(k.pid)
FROM pg_locks k
WHERE k.locktype = 'advisory' AND k.objsubid = 1 AND k.granted
  AND ((k.classid::bigint << 32) | k.objid::bigint) = $1::bigint
  AND k.pid <> pg_backend_pid();
