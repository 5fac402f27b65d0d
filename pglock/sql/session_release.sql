-- session_release.sql: release this session's advisory lock $1, restore
-- idle_session_timeout to $2, and notify channel $3 with the lock's name
-- $4. The first column says whether the lock was held.
SELECT pg_advisory_unlock($1),
       set_config('idle_session_timeout', $2, false),
       pg_notify($3, $4)::text;
