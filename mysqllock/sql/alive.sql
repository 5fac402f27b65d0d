-- alive.sql: whether connection ?1 still exists on the server (a session
-- sees its own account's connections without the PROCESS privilege).
SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?
