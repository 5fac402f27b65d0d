-- session_acquire.sql: try the advisory lock $1 for this session; if
-- taken, draw a fence from sequence $2 and set the session's
-- idle_session_timeout to $3, so that the database ends the session, and
-- frees the lock, when its holder falls silent. One row: (the fence, or
-- NULL when the lock is held by another session; this backend's PID; the
-- idle_session_timeout to restore on release). The inner query runs
-- first, once (OFFSET 0 keeps it from being merged into the outer one).
SELECT s.fence, pg_backend_pid(), s.before,
       set_config('idle_session_timeout', CASE WHEN s.fence IS NULL THEN s.before ELSE $3 END, false)
FROM (SELECT current_setting('idle_session_timeout') AS before,
             CASE WHEN pg_try_advisory_lock($1) THEN nextval($2::text::regclass) END AS fence
      OFFSET 0) s;
