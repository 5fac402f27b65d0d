// Package pglock implements dlock's locks on a PostgreSQL database, through
// a pgx connection pool, in two modes that share one row per lock name:
// lease mode (Mutex), where the row, with its expiry on the database's
// clock, is the lock; and session mode (SessionMutex), where a
// connection's session also holds an advisory lock for as long as the
// lease lasts, so that the holder learns at once when the database ends
// its session. A name is one lock whichever mode takes it: a Mutex and a
// SessionMutex of the same name exclude each other. Fences come from the
// row, and WriteFenced checks a fence and makes the write it guards in one
// transaction.
//
// Choose it when the data the lock protects lives in the same database.
// A lock service alone cannot stop a holder that was paused past its lease
// from writing after its successor; a fence can, if the resource checks
// it. Here the check and the write commit together or not at all, so no
// stale write can land, whatever the holder's clock or pauses. Choose
// Redis (redislock) when lock traffic is heavy and the data is elsewhere,
// and ZooKeeper (zklock) when you need fair queues without a TTL to guess.
//
// # Usage
//
//	locks := pglock.New(pool) // the *pgxpool.Pool you already have
//	defer locks.Close()       // before pool.Close
//	if err := locks.Migrate(ctx); err != nil { ... }
//	lease, err := locks.NewMutex("nightly-report").Lock(ctx)
//	if err != nil { ... }
//	defer lease.Release(ctx)
//	// pass lease.Fence() to WriteFenced; watch lease.Done()
//
// See Example, ExampleClient_NewSessionMutex and ExampleClient_WriteFenced.
//
// # Setting up
//
// New takes the caller's *pgxpool.Pool and never fails; the first call
// that needs the database reports a bad argument. Migrate creates the
// Client's objects if they do not exist (a table of locks, a sequence of
// fences and a table of fences for WriteFenced, all named after the table
// that WithTable sets); SchemaSQL returns the same SQL for those who run
// their migrations themselves. The role needs SELECT, INSERT and UPDATE on
// the tables and USAGE on the sequence. Every value reaches the database
// as a parameter; table names are checked and quoted.
//
// Behind a pooler in transaction mode (PgBouncer's pool_mode =
// transaction), lease mode works, since each of pglock's round trips is a
// transaction of its own, provided pgx does not keep prepared statements
// across transactions: PgBouncer before 1.21 (or without
// max_prepared_statements) fails pgx's default exec mode with "prepared
// statement already exists" (42P05); set default_query_exec_mode=exec
// (or simple_protocol) in the pool's connection string. Release notices
// need a session of their own (LISTEN), so waiters there poll. Session
// mode needs a session: see Session mode.
//
// # Server settings
//
// pglock sends each of its round trips as a transaction of its own, BEGIN
// ISOLATION LEVEL READ COMMITTED to COMMIT in one batch, so that the
// settings a server, a database or a role may default to change nothing:
//
//   - default_transaction_isolation: REPEATABLE READ and SERIALIZABLE
//     would make an acquire that meets a concurrent grant fail with a
//     serialization failure (40001) instead of waiting for it and reading
//     the row it committed; pglock's statements run at READ COMMITTED
//     whatever it says. A serialization failure or a deadlock (40P01) is
//     made again at once, up to three times; an attempt still failing so
//     did not obtain the lock: Lock waits on, and TryLock returns an error
//     matching dlock.ErrNotObtained. Neither Lock nor an election's
//     Campaign returns them.
//   - lock_timeout: pglock's transactions wait at most a second for a
//     row's lock, or lock_timeout if it is shorter: an attempt that meets
//     its lock's row held by another transaction (an operator's SELECT
//     ... FOR UPDATE, a long transaction that touched it) past that
//     (55P03) found the lock held, and is not made again at once (see
//     Faults).
//   - statement_timeout: pglock does not override it, but waits for a
//     row's lock at most half of it when that is less than a second, so
//     that a held row is still a held lock: a wait that statement_timeout
//     cut short (57014) would look like a database that does not answer.
//   - idle_in_transaction_session_timeout: no transaction of pglock's
//     spans two round trips (Migrate's neither), so the timeout never
//     ends one, however slow the network. WriteFenced's transaction spans
//     the caller's statements: the timeout must exceed their round trips.
//   - synchronous_commit: off would make a commit return before its WAL
//     is flushed, and a crash within a few wal_writer_delay lose it; a
//     crash of any one backend is enough, which the postmaster recovers
//     from without restarting, so that no restart window sees it, and a
//     lost grant is a second holder. pglock's transactions set it to
//     local when it is off; any other value stands.
//   - default_transaction_read_only: pglock does not override it. An
//     operator who turns it on (for a server, a database or a role; or
//     the server is a standby) means that nothing is to be written, as
//     when fencing a primary during a switchover, and a lock service that
//     wrote anyway could grant on the old primary while the new one
//     grants too. Such a server is unavailable to pglock: Lock waits
//     until it takes writes (see Faults), TryLock returns an error
//     matching dlock.ErrUnavailable, and every other call that writes
//     fails at once; each error names the setting.
//
// WriteFenced and CheckFence run in the caller's transaction, at the
// isolation level it has.
//
// # The lock's row
//
// Each lock name has a row in the Client's table, created by the first
// attempt on the name and kept after it is released, that holds the
// holder's random owner token, the fence of the latest grant and an expiry
// on the database's clock. Both modes take the lock in one round trip and
// one transaction, which takes the row only if it is free or expired:
// every decision about time is made on the database's clock, never the
// client's.
//
// A lease's Until is the send time of its last successful acquire or
// renewal plus the TTL, less 1% of the TTL and 2ms for clock drift, on the
// local monotonic clock: the database, which started counting later,
// cannot expire the row before it, and no one else can take the row
// before it expires, in either mode, whatever becomes of the holder's
// connections or the database's processes, so long as the database keeps
// what it committed, or else sits out a restart window (see Restarts,
// failovers and restores; the fence rises either way, see Fencing). The
// Client's watchdog renews
// every lease every TTL/3. Done closes at Until if no renewal has
// succeeded by then (the database is unreachable, paused or slow), and at
// the first renewal that finds the row taken by another token. Either way,
// Err says why. A renewal that was on its way when the holder called
// Release does not end the lease as lost: Release does, as released.
//
// # Lease mode
//
// A Mutex is the row and nothing more. The watchdog renews the due leases
// of a batch in one statement, on any of the pool's connections.
//
// # Session mode
//
// A SessionMutex takes the row on a connection that the lease takes from
// the pool and keeps until it ends, and in the same statement a
// session-level advisory lock with pg_try_advisory_lock; it takes neither
// if either is held. It sets the session's idle_session_timeout to the
// TTL (PostgreSQL 14 or later), so that the database ends the session of
// a holder that falls silent, about when its row expires.
//
// While the connection is idle, the lease watches it: when the database
// ends the session (terminated, restarted) or the connection breaks, the
// lease ends at once, with an error matching dlock.ErrLost and
// ErrSessionLost, instead of at Until. The row stays held until it expires
// all the same, since the database also ends sessions whose holder cannot
// hear it. Each lease is renewed on its own connection; a failed renewal
// closes the connection, which ends the session, and the lease. The
// connection goes back to the pool only after a clean release.
//
// Session mode offers, over lease mode: the holder learns at once that its
// session ended (terminated, restarted, a broken connection), not only at
// its Until; its renewals do not wait for a connection of the pool; and
// the holder shows in pg_locks (see SessionMutex.AdvisoryKey). It does not
// hand the lock on sooner when a holder dies: a successor waits for the
// row to expire, as in lease mode. It needs a direct connection to the
// database, or a pooler in session mode: behind a pooler in transaction
// mode the connection's session is not the lock's, which the watchdog
// reports as a loss. Each held lease takes one of the pool's connections;
// size the pool for them.
//
// Advisory locks need no privilege, and a SessionMutex's key is derived
// from the table's name and the lock's alone: any account that may
// connect to the database, with no grant on pglock's objects, can take it
// (pg_advisory_lock) and keep every SessionMutex of that name from the
// lock for as long as it stays connected. It cannot take the row, so it
// cannot hold the lock, only block it. On a database that accounts you do
// not trust can connect to, use lease mode, whose lock is the row alone,
// which only the grants on the table reach; or give the lock a name with
// a secret of the deployment in it, which makes its key unguessable.
//
// # Fencing
//
// Every grant, in either mode, sets the row's fence to the largest of
// three values: the next value of the Client's sequence, the row's last
// fence plus one, and the database's clock (clock_timestamp) in
// microseconds. So every fence is larger than the fence of the grant
// before it: on the same row; on a row deleted behind pglock's back and
// created again; and after the database is restored from a backup, or
// fails over to a copy that lags, by the clock, which does not go back
// with the data (the argument is in docs/ARCHITECTURE.md). No call to
// Migrate is needed first.
//
// This assumes that the database's clock does not step back, and that
// after a failover the new server's clock is not behind the old one's by
// more than the failover took. Fences follow the clock, so they stay below
// 2^53, which JSON and JavaScript consumers read exactly, until the year
// 2255; a grant that would give a larger fence is refused with an error.
// Migrate also moves the sequence up to the clock; fences do not depend on
// it.
//
// Pass the fence to what you protect. For rows in the same database,
// WriteFenced runs the caller's writes in a transaction that first records
// the fence as the newest for the resource (an upsert into the fences
// table that succeeds only if no higher fence is recorded, and locks the
// resource's row until the transaction ends), and refuses with
// ErrStaleFence, writing nothing, if a later holder has written; CheckFence
// does the same in the caller's own transaction.
//
// # Restarts, failovers and restores
//
// A database restored from a backup, or failed over to a replica that
// lags, may have lost the row of a lease that is still valid by its
// holder's Until, and would grant the lock again at once: two holders
// (the fence still rises, so WriteFenced refuses the old one). So a
// server sits out a restart window after a change that may have lost
// committed rows, as a Redis node does in package redlock:
//
//   - By default, the server's identity is its system identifier and its
//     current timeline (pg_control_system, pg_current_wal_lsn): a
//     failover to a promoted replica, a point-in-time recovery, or any
//     restore that ends recovery on a new timeline changes the timeline;
//     a switch to another cluster (a logical replica) changes the system
//     identifier. The first attempt that finds the identity not the one
//     recorded in the Client's table records it, and from then on the
//     server grants no lock for the lock's TTL (or the restart window, if
//     one is set): every lease granted before has ended by then. The
//     identity lives in a row of the table with the empty name, which no
//     lock may have; a restore or a replica carries it along with the
//     lock rows. The first identity ever recorded starts no window, so a
//     new database grants at once; and so does a plain restart, which
//     keeps what was committed.
//   - WithRestartWindow(d) also treats every start of the server (by
//     pg_postmaster_start_time) as a possible loss: for d after it, no
//     grant. That covers a restore that keeps the timeline (a copied data
//     directory or disk snapshot, a base backup started without recovery
//     settings) and a crash that lost committed writes (fsync off, a disk
//     that lies). It costs d of unavailability after every restart, and
//     bounds every TTL of the Client; every Client of the database must
//     use the same window.
//   - WithoutRestartDetection turns both off.
//
// Detection calls pg_control_system(), pg_current_wal_lsn(),
// pg_walfile_name() and pg_postmaster_start_time(), which PUBLIC may
// execute unless revoked (as some managed services do): a role that may
// not gets an error naming WithoutRestartDetection. An attempt refused for
// a window fails with an error matching dlock.ErrNotObtained that says how
// long is left; Lock waits it out. The windows are measured on the
// database's clock. Not covered: a failover
// before any attempt recorded the identity; a restore of the table alone
// (pg_restore of a dump into a running server) without
// WithRestartWindow; without WithRestartWindow, a lease lost in a
// failover whose TTL is longer than that of the next lock of its name,
// which sits out only its own (give every Client that locks one name
// with different TTLs WithRestartWindow of the longest); and, with
// detection off, all of the above
// (TestIntegrationRestoredDatabase: a second holder 2.3–2.8s before the
// first one's Until, 21–50ms after the restore; with detection, none).
//
// # Nothing left behind
//
// A lock's row stays after it is released, free and with its last
// fence: one row per name ever locked, and one more, with the empty name,
// for the server's identity (see Restarts, failovers and restores).
// Deleting the rows of locks that are free or expired is safe: a later
// grant's fence still exceeds theirs (see Fencing). Keep the identity's
// row, whose expiry, the time it was recorded, is always past: deleting it
// forgets the identity, and a failover to a copy that lacks the row (one
// that lags behind the next grant, which records it again) is then not
// seen as a change. So:
//
//	DELETE FROM dlock_leases WHERE expires_at < now() AND name <> ''
//
// An attempt or release whose outcome did not reach the client (a context
// done while the statement was on its way, a broken connection) is cleaned
// up in the background. Close waits for these clean-ups, and for the
// releases of held leases before them, 1.5 seconds at most in all (see
// Faults): when it returns, nothing a failed or released attempt took is
// left, unless the database could not be reached in that time, which
// Close reports; that row then expires within its TTL.
//
// # Waiting
//
// Lock first tries once. If the lock is held, the waiter registers with the
// Client's listener, which LISTENs for the release notices of the Client's
// table on one connection of its own (taken from the pool when the first
// waiter needs it, no longer counted by it, and closed by Close), and
// retries at once when a release of its lock is notified. It also retries
// when the holder's row expires, which the failed attempt reports, and
// after a backoff from its RetryStrategy in case a notice is lost. Locks
// are not fair; waiters race.
//
// # Faults
//
// Lock waits through what heals: a connection refused, reset, closed or
// silent; a server shutting down, starting up or in recovery (SQLSTATE
// 57P01, 57P02, 57P03), out of connections or other resources (class
// 53), reporting a failed connection (class 08) or an I/O error (58000,
// 58030); a statement it cancelled (57014: statement_timeout); a
// read-only transaction (25006: a standby not promoted yet, a primary
// fenced for a switchover). In session mode, a waiter whose connection
// is lost waits on just the same. It tries again as its RetryStrategy
// says, and when its ctx ends first (or the strategy gives up), its error
// matches dlock.ErrUnavailable as well as dlock.ErrNotObtained and
// ctx.Err(), even if the failure came only as ctx ended (but not for a
// failure that ctx's end may have caused: a timeout of ctx's deadline, a
// connection pgx closed, a statement cancelled, 57014): a
// *dlock.UnavailableError naming the database ("postgres"
// and the pool's address), since when its attempts have failed, and the
// last failure. It fails at once only on what waiting does not heal: a
// refused login or permission (28000, 28P01, 42501), missing objects
// (42P01: call Migrate), a table that is not pglock's, a closed pool, a
// TLS failure, a bad name or option, a closed Client.
//
// Each attempt waits for the database for the lock's TTL, but at least 2
// seconds and at most 5 (its attempt timeout): TryLock on a database that
// cannot be reached or does not answer returns within it (at once if the
// connection is refused) with an error matching dlock.ErrUnavailable and
// never dlock.ErrNotObtained, since whether the lock is held is unknown;
// a grant that arrives too late to be used is given back first, which
// takes a round trip more. An attempt given up is cleaned up in the
// background, as any interrupted one (see Nothing left behind). Release
// waits for the database no longer, whatever its ctx (in session mode, it
// may also wait for a renewal under way on the lease's connection, until
// the lease's Until at most): the lease ends all the same, and its row is
// freed in the background, or expires within its TTL. A Release that
// could not reach the database, or that it did not answer, returns an
// error matching dlock.ErrUnavailable, as TryLock does.
//
// Two answers are not unavailability. A lock's row that another
// transaction holds is a held lock: pglock's transactions wait a second
// at most for it (see Server settings), and TryLock then returns an error
// matching dlock.ErrNotObtained. And a server within a restart window (see Restarts,
// failovers and restores) answers that it grants nothing for a known
// time: the lease it may have lost counts as held until then, as a
// restarted Redlock node abstains; TryLock's error matches
// dlock.ErrNotObtained and says how long, and Lock waits it out.
//
// Close waits 1.5 seconds at most for a database that does not answer,
// for the releases of the leases still held and then for the clean-ups
// (0.2 more when a session-mode release waits for its connection, which
// a renewal holds: it goes on in the background, ended by the lease's
// Until); what it could not free expires within its TTL. A Lock or
// TryLock under way returns at once, with an error matching both
// ErrClosed and dlock.ErrNotObtained.
//
// None of this costs a round trip: an uncontended Lock and its Release
// take one each, lock_timeout being set in the statement of the batch
// that sets synchronous_commit.
//
// # Observing
//
// WithObserver gives a Client a dlock.Observer (package dlockprom makes
// Prometheus metrics of it), and WithLogger a slog.Logger, to report the
// events of every lock of the Client, as the other backends do. Events
// carry the lock's name and its kind: "Mutex" (lease mode) or
// "SessionMutex".
//
// # What it cannot offer
//
// No reentrant, read-write or semaphore kinds, and no fair queue: a name
// is one lock, whether a Mutex, a SessionMutex or an Election's leader
// takes it, so no kind of lock is refused for another (see
// dlock.ErrKindMismatch). Fenced writes are WriteFenced's (see Fencing).
//
// # Limits
//
//   - A holder paused past its lease can still write to a resource that
//     does not check its fence: use WriteFenced or CheckFence.
//   - Fences assume the database's clock does not step back, and that after
//     a failover the new server's clock is not behind the old one's by more
//     than the failover took.
//   - A restored or lagging database can grant a lock again while an old
//     lease is valid unless restart detection sees it: not covered are a
//     failover before any attempt recorded the identity, a restore of the
//     table alone without WithRestartWindow, and anything with detection
//     off (see Restarts, failovers and restores).
//   - Any account that may connect can block (not hold) a SessionMutex by
//     its advisory key; use lease mode, or a secret in the name.
//   - Behind a pooler in transaction mode, session mode does not work and
//     waiters poll.
//
// # See also
//
// How the row is taken, the session watched, fences computed and
// interrupted attempts cleaned up:
// https://github.com/dlock-go/dlock/blob/main/docs/ARCHITECTURE.md#pglock.
// Measured behaviour under faults:
// https://github.com/dlock-go/dlock/blob/main/docs/SAFETY.md.
// Package fence checks these fences in other resources.
package pglock
