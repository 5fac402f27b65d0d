// Package pglock implements dlock's locks on a PostgreSQL database, through
// a pgx connection pool, in two modes: lease mode (Mutex), a row per lock
// with an expiry on the database's clock; and session mode
// (SessionMutex), an advisory lock held by a connection's session. Both
// give fences from one sequence, and WriteFenced checks a fence and makes
// the write it guards in one transaction.
//
// Choose it when the data the lock protects lives in the same database.
// A lock service alone cannot stop a holder that was paused past its lease
// from writing after its successor; a fence can, if the resource checks
// it. Here the check and the write commit together or not at all, so no
// stale write can land, whatever the holder's clock or pauses. Choose
// Redis (redislock) when lock traffic is heavy and the data is elsewhere,
// and ZooKeeper (zklock) when you need fair queues without a TTL to guess.
//
// # Setting up
//
// New takes the caller's *pgxpool.Pool and never fails; the first call
// that needs the database reports a bad argument. Migrate creates the
// Client's objects if they do not exist (a table of leases, a sequence of
// fences and a table of fences for WriteFenced, all named after the table
// that WithTable sets); SchemaSQL returns the same SQL for those who run
// their migrations themselves. The role needs SELECT, INSERT and UPDATE on
// the tables and USAGE on the sequence. Every value reaches the database
// as a parameter; table names are checked and quoted.
//
// # Lease mode
//
// A Mutex is a row of the lease table, keyed by the lock's name, holding
// the holder's random owner token, its fence and an expiry. Acquiring is
// one statement,
//
//	INSERT ... ON CONFLICT (name) DO UPDATE ... WHERE expires_at <= now()
//
// that takes the row if it is missing, free or expired, and sets the
// expiry to now() plus the TTL: every decision about time is made on the
// database's clock, never the client's. An attempt on a lock that is
// plainly held only reads: it neither locks nor writes the row. Releasing frees the row (it stays,
// with its last fence) if the token still holds it, and notifies waiters;
// refreshing moves the expiry if the token still holds it.
//
// A lease's Until is the send time of its last successful acquire or
// renewal plus the TTL, less 1% of the TTL and 2ms for clock drift, on the
// local monotonic clock: the database, which started counting later,
// cannot expire the row before it. The Client's watchdog renews every
// lease every TTL/3, the due leases of a batch in one statement. Done
// closes at Until if no renewal has succeeded by then (the database is
// unreachable, paused or slow), and at the first renewal that finds the
// row taken by another token. Either way, Err says why.
//
// # Session mode
//
// A SessionMutex takes a session-level advisory lock with
// pg_try_advisory_lock, on a connection that the lease takes from the pool
// and keeps until it ends. The lock lasts exactly as long as the session,
// so nothing has to expire it: the database frees it when the lease is
// released, when the connection breaks, when its backend is terminated,
// and when the client falls silent for the TTL, because the lease sets
// the session's idle_session_timeout to it (PostgreSQL 14 or later).
//
// While the connection is idle, a goroutine waits on it for anything the
// database sends; a terminated session says so before it closes, and a
// broken connection fails the read, so the lease ends at once, with an
// error matching dlock.ErrLost and ErrSessionLost. The watchdog confirms
// every lease every TTL/3 with a round trip on its connection, which
// proves the session alive when it was sent, and extends Until as in
// lease mode; a failed confirmation closes the connection, which ends the
// session, and the lease. The connection goes back to the pool, with
// idle_session_timeout restored, only after a clean release.
//
// Session mode needs a direct connection to the database, or a pooler in
// session mode: behind a pooler in transaction mode the connection's
// session is not the lock's, which the watchdog reports as a loss. Each
// held lease takes one of the pool's connections; size the pool for them.
//
// # Fencing
//
// Every grant's fence is the next value of the Client's sequence. In
// session mode it is drawn after the advisory lock is taken. In lease
// mode, a take-over of the row draws it once the row is locked, and never
// below the row's last fence plus one; only the first grant of a name,
// which inserts the row, draws it as its statement starts. (A release
// keeps the row, so only a row deleted behind pglock's back is inserted
// again.) A successor is granted the lock only after its predecessor's
// grant has committed, so its fence is larger, including when it takes
// over an expired lease. Migrate also moves the sequence up to the
// database's clock in microseconds, so that a database recreated empty,
// or restored from a backup, goes on giving larger fences; call it
// whenever the program starts.
//
// Pass the fence to what you protect. For rows in the same database,
// WriteFenced runs the caller's writes in a transaction that first records
// the fence as the newest for the resource (an upsert into the fences
// table that succeeds only if no higher fence is recorded, and locks the
// resource's row until the transaction ends), and refuses with
// ErrStaleFence, writing nothing, if a later holder has written; CheckFence
// does the same in the caller's own transaction.
//
// # Waiting
//
// Lock first tries once. If the lock is held, the waiter registers with the
// Client's listener, which LISTENs for the release notices of the Client's
// table on one connection of its own (taken from the pool when the first
// waiter needs it, no longer counted by it, and closed by Close), and
// retries at once when a release of its lock is notified. It also retries
// when the holder's lease runs out (lease mode, which the failed attempt
// reports), and after a backoff from its RetryStrategy in case a notice is
// lost. Locks are not fair; waiters race.
//
// # Observing
//
// WithObserver gives a Client a dlock.Observer (package dlockprom makes
// Prometheus metrics of it), and WithLogger a slog.Logger, to report the
// events of every lock of the Client, as the other backends do. Events
// carry the lock's name and its kind: "Mutex" (lease mode) or
// "SessionMutex".
package pglock
