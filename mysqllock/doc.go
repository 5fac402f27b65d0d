// Package mysqllock implements dlock's locks on a MySQL or MariaDB
// database, through the caller's *sql.DB (github.com/go-sql-driver/mysql),
// in two modes that share one row per lock name: lease mode (Mutex), where
// the row, with its expiry on the database's clock, is the lock; and
// session mode (SessionMutex), where a connection's session also holds a
// GET_LOCK lock for as long as the lease lasts, so that the holder learns
// soon when the database ends its session. A name is one lock whichever
// mode takes it: a Mutex and a SessionMutex of the same name exclude each
// other.
//
// Choose it when the data the lock protects lives in the same MySQL or
// MariaDB database: no new server to run, and the fence can be checked in
// the same transaction as the write (UPDATE … WHERE fence <= ?). Choose
// Redis (redislock) when lock traffic is heavy or lease-mode waiters must
// be woken at once across processes, and pglock on PostgreSQL, whose
// LISTEN/NOTIFY wakes waiters on release.
//
// # Usage
//
//	locks := mysqllock.New(db) // the *sql.DB you already have
//	defer locks.Close()        // before db.Close
//	if err := locks.Migrate(ctx); err != nil { ... }
//	lease, err := locks.NewMutex("nightly-report").Lock(ctx)
//	if err != nil { ... }
//	defer lease.Release(ctx)
//	// pass lease.Fence() to the resource (package fence); watch lease.Done()
//
// See Example and ExampleClient_NewSessionMutex.
//
// # Setting up
//
// New takes the caller's *sql.DB and never fails; the first call that
// needs the database reports a bad argument. Migrate creates the Client's
// table if it does not exist (see WithTable); SchemaSQL returns the same
// SQL for those who run their migrations themselves. The account needs
// SELECT, INSERT and UPDATE on the table. It is written for MySQL 5.7
// and later and MariaDB 10.3 and later, and tested on MariaDB 10.11 only,
// whatever the DSN's options: every statement is one round trip of plain SQL
// (COM_QUERY) in which mysqllock writes each value itself, names and
// tokens as hexadecimal literals (X'…'), so that nothing a caller passes
// is parsed as SQL and interpolateParams, the connection's character set
// and the sql_mode make no difference.
//
// # Server settings
//
// Every statement mysqllock runs is a transaction of its own, committed
// when it ends, whatever the session's defaults:
//
//   - autocommit: with it off (autocommit=0 in the DSN, the server's
//     default, or init_connect), a grant would stay uncommitted on a
//     connection of the pool, unseen by others and holding the row's lock,
//     until the pool closed the connection and rolled it back. mysqllock
//     learns each connection's autocommit when it first takes it, turns it
//     on for the statements it runs there (which commits whatever the
//     session had left open) and off again before the connection goes
//     back to the pool (a session-mode lease's, when the lease ends). A
//     transaction that init_connect began (START TRANSACTION), which
//     autocommit does not end, it commits when it first takes the
//     connection.
//   - tx_isolation (transaction_isolation): with each statement its own
//     transaction, REPEATABLE READ (the default) and SERIALIZABLE work as
//     READ COMMITTED does. A deadlock (1213), which a concurrent statement
//     causes, is made again at once, up to three times; an attempt still
//     failing so did not obtain the lock: Lock waits on, and TryLock
//     returns an error matching dlock.ErrNotObtained. Neither Lock nor an
//     election's Campaign returns it.
//   - innodb_lock_wait_timeout (50 seconds by default): an attempt's
//     statements that write wait at most a second for a row's lock, or
//     innodb_lock_wait_timeout if it is shorter, set in the statement
//     itself (MariaDB's SET STATEMENT, MySQL 8's SET_VAR hint): an attempt
//     that meets its lock's row held by another transaction past that
//     (1205) found the lock held, and is not made again at once (see
//     Faults). MySQL 5.7 offers neither way; there the session's setting
//     stands, and a row held past the attempt timeout counts as an
//     unavailable database.
//   - max_statement_time (MariaDB): those statements run without it (set
//     in the statement too), since one shorter than the lock wait would
//     cut the wait short (1969) and make a held lock look like a server
//     that does not answer; a row's lock ends their wait first. It still
//     bounds every other statement, GET_LOCK's wait included (see
//     Waiting).
//   - read_only, super_read_only, transaction_read_only: mysqllock does
//     not override them. Such a server is unavailable to mysqllock: Lock
//     waits until it takes writes, as after a switchover (see Faults),
//     TryLock returns an error matching dlock.ErrUnavailable, and every
//     other call that writes fails at once; each error names them.
//
// # Names
//
// A lock name is any non-empty UTF-8 text up to MaxNameBytes (1024) bytes,
// 4-byte runes included, stored as VARBINARY and compared byte for byte:
// "a" and "A", or "é" composed and decomposed, are different locks,
// whatever the collations of the server. GET_LOCK names are limited to 64
// characters and compared without regard to case, so session mode's
// GET_LOCK lock is named by a hash of the table and the name (see
// SessionMutex.LockName), never by the name itself.
//
// # The lock's row
//
// Each lock name has a row in the Client's table, created by the first
// attempt on the name and kept after it is released, that holds the
// holder's random owner token, the fence of the latest grant and an
// expiry in microseconds on the database's UTC clock (so the session's
// time_zone plays no part). Both modes take the lock with one statement,
// which takes the row only if it is free or expired: every decision about
// time is made on the database's clock, never the client's.
//
// A lease's Until is the send time of its last successful acquire or
// renewal plus the TTL, less 1% of the TTL and 2ms for clock drift, on the
// local monotonic clock: the database, which started counting later,
// cannot expire the row before it, and no one else can take the row
// before it expires, in either mode, so long as the database keeps what it
// committed, or else sits out a restart window (see Restarts, failovers
// and restores). The Client's watchdog renews every lease every TTL/3. Done
// closes at Until if no renewal has succeeded by then (the database is
// unreachable, paused or slow), and at the first renewal that finds the
// row taken by another token. Either way, Err says why.
//
// # Lease mode
//
// A Mutex is the row and nothing more. The watchdog renews the due leases
// of a batch in one statement (one per TTL among them), on any of the
// pool's connections.
//
// # Session mode
//
// A SessionMutex takes GET_LOCK(LockName(), 0) on a connection that the
// lease takes from the pool and keeps until it ends, and then the row on
// the same connection; it takes neither if either is held. It sets the
// session's wait_timeout to the TTL, rounded up to whole seconds, so that
// the database ends the session of a holder that falls silent, and frees
// its GET_LOCK lock.
//
// database/sql cannot wait on an idle connection, so each session-mode
// lease pings its connection every tenth of its TTL (between 20ms and 1s):
// a connection the database killed (KILL CONNECTION, wait_timeout, a
// restart) or that broke ends the lease then, with an error matching
// dlock.ErrLost and ErrSessionLost, rather than at Until. The row stays
// held until it expires all the same. A renewal that finds the GET_LOCK
// lock gone ends the lease. The connection goes back to the pool only
// after a clean release.
//
// Session mode offers, over lease mode: the holder learns within its
// check interval that its session ended, not only at its Until; its
// renewals do not wait for a connection of the pool; and the holder shows
// as IS_USED_LOCK(LockName()). It does not hand the lock on sooner when a
// holder dies: a successor waits for the row to expire, as in lease mode.
// It needs a direct connection to the database, or a proxy that pins
// sessions. Each held lease takes one of the pool's connections; size the
// pool for them.
//
// GET_LOCK needs no privilege, its names are the whole server's, and a
// SessionMutex's LockName is derived from the table's name and the lock's
// alone: any account that may connect to the server, with no grant on any
// database, can take it and keep every SessionMutex of that name from the
// lock for as long as it stays connected. It cannot take the row, so it
// cannot hold the lock, only block it. On a server that accounts you do
// not trust can connect to, use lease mode, whose lock is the row alone,
// which only the grants on the table reach; or give the lock a name with
// a secret of the deployment in it, which makes its LockName unguessable.
//
// # Fencing
//
// Every grant, in either mode, sets the row's fence to the larger of the
// row's last fence plus one and the database's clock in microseconds. So
// each fence exceeds the one before it on the same row, and a row deleted
// behind mysqllock's back, a table truncated, or a database restored from
// a backup gives fences that still exceed every earlier one, by the clock,
// which does not go back with the data (the argument is in
// docs/ARCHITECTURE.md). This assumes that the database's clock does not
// step back. Fences follow the clock, so they stay below 2^53, which JSON
// and JavaScript consumers read exactly, until the year 2255; a grant that
// would give a larger fence is refused with an error.
//
// Pass the fence to what you protect. For rows in the same database, keep
// the newest fence beside the data and write only if yours is not older:
// UPDATE account SET …, fence = ? WHERE id = ? AND fence <= ?, in the
// transaction that makes the write (fence.Row writes that statement), or
// let fence.NewSQL(fence.MySQL) keep the highest fence per resource in a
// table of its own, checked in the writer's transaction.
//
// # Restarts, failovers and restores
//
// A database restored from a backup, or failed over to a replica that
// lags, may have lost the row of a lease that is still valid by its
// holder's Until, and would grant the lock again at once: two holders
// (the fence still rises). So a server sits out a restart window after a
// change that may have lost committed rows, as a Redis node does in
// package redlock:
//
//   - By default, the server's identity is its @@server_id, @@hostname and
//     @@port: a failover to a replica (which replication requires to have
//     a server_id of its own) changes it. On each connection, the first
//     attempt records the identity in a row of the Client's table with
//     the empty name, which no lock may have, or finds it there; one that
//     finds another identity there records the new one, and from then on
//     the server grants no lock for the lock's TTL (or the restart window,
//     if one is set): every lease granted before has ended by then. A
//     replica carries the row along with the lock rows. The first
//     identity ever recorded starts no window, so a new database grants
//     at once; and so does a plain restart, which keeps what was
//     committed.
//   - WithRestartWindow(d) also treats every start of the server (by its
//     Uptime status, read on each new connection) as a possible loss: for
//     d after it, no grant. That covers a restore on the same server (a
//     copied data directory or disk snapshot, mariabackup) and a crash
//     that lost committed writes (innodb_flush_log_at_trx_commit other
//     than 1, a disk that lies). It costs d of unavailability after every
//     restart, and bounds every TTL of the Client; every Client of the
//     database must use the same window.
//   - WithoutRestartDetection turns both off.
//
// An attempt refused for a window fails with an error matching
// dlock.ErrNotObtained that says how long is left; Lock waits it out. The
// windows are measured on the database's clock. Not covered: a failover
// before any attempt recorded the identity; a replica on the same host
// and port, with the same server_id; a failover or a restart behind a
// proxy that keeps the client's connections across it (ProxySQL,
// MaxScale): the identity and the start are read once per connection; a
// restore of the table alone into a running server, without
// WithRestartWindow; without WithRestartWindow, a lease lost in a
// failover whose TTL is longer than that of the next lock of its name,
// which sits out only its own (give every Client that locks one name
// with different TTLs WithRestartWindow of the longest); and, with
// detection off, all of the above (TestIntegrationRestoredDatabase: a second holder
// 2.6–3.5s before the first one's Until, 4–9ms after the restore; with
// detection, none).
//
// # Nothing left behind
//
// A lock's row stays after it is released, free and with its last fence:
// one row per name ever locked, and one more, with the empty name, for
// the server's identity (see Restarts, failovers and restores). Deleting
// the rows of locks that are free or expired is safe (see Fencing). Keep
// the identity's row, whose expiry, the time it was recorded, is always
// past: deleting it forgets the identity, and a failover to a copy that
// lacks the row (one that lags behind the next grant, which records it
// again) is then not seen as a change. So:
//
//	DELETE FROM dlock_leases WHERE name <> X''
//	    AND expires_at < TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(6))
//
// An attempt or release whose outcome did not reach the client (a context
// done while the statement was on its way, a broken connection) is cleaned
// up in the background. Close waits for these clean-ups, and for the
// releases of held leases before them, 1.5 seconds at most in all (see
// Faults).
//
// # Waiting
//
// MySQL has no LISTEN/NOTIFY. Lock first tries once; if the lock is held,
// it waits with the backoff of its RetryStrategy (DefaultRetry: from 2ms,
// doubling to 64ms, with full jitter) and tries again, sooner when the
// holder's row is due to expire, and at once when a lease of the same
// Client releases the lock.
//
// In session mode, while another session holds the lock's GET_LOCK lock,
// each wait is GET_LOCK(LockName(), backoff) on the server, which the
// holder's release, or the end of its session, ends at once: a waiter on
// another Client took the lock 1.8ms after the release on average (9.6ms
// at most) in TestIntegrationWakeUpLatency on MariaDB 10.11 on loopback.
// Each waiter holds one of its pool's connections while it waits there. A
// wait that the server cuts short (MariaDB's max_statement_time) counts
// as one that found the lock held: Lock waits on.
//
// In lease mode, and while a lease-mode holder has the name, a waiter
// polls: each poll of a held lock is two short statements, and a release
// by another Client is seen at the next poll, within 64ms with the
// default (about 22ms on average, 56ms at most, in the same test); a
// waiter on the releasing Client is woken in about 1ms. Locks are not
// fair; waiters race.
//
// # Faults
//
// Lock waits through what heals: a connection refused, reset, closed or
// silent (the driver's invalid connection); a server shutting down
// (1053), out of connections (1040, 1203) or memory, a session it killed
// (1927) or disconnected (4031), a statement it interrupted or timed out
// (1317, MariaDB's 1969, MySQL's 3024); a read-only server (1290, 1792,
// 1836: a replica, a primary fenced for a switchover); a Galera node not
// ready (1047). In session mode, a waiter whose connection is lost, in
// GET_LOCK or between its tries, waits on just the same. It tries again
// as its RetryStrategy says, and when its ctx ends first (or the strategy
// gives up), its error matches dlock.ErrUnavailable as well as
// dlock.ErrNotObtained and ctx.Err(), even if the failure came only as
// ctx ended (but not for a failure that ctx's end may have caused: a
// timeout of ctx's deadline, a bad connection that the driver closed to
// interrupt a statement): a *dlock.UnavailableError naming the
// server ("mysql" and the @@hostname:@@port it last reported: the *sql.DB
// does not say where it connects), since when its attempts have failed,
// and the last failure. It fails at once only on what waiting does not
// heal: a refused login or privilege (1045, 1044, 1142), a missing table
// (1146: call Migrate), a table that is not mysqllock's, a closed
// *sql.DB, a TLS failure, a bad name or option, a closed Client.
//
// Each attempt waits for the database for the lock's TTL, but at least 2
// seconds and at most 5 (its attempt timeout), beyond the time a
// session-mode attempt waits in GET_LOCK: TryLock on a database that
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
// transaction holds is a held lock: an attempt's statements wait a second
// at most for it (see Server settings), and TryLock then returns an error
// matching dlock.ErrNotObtained. And a server within a restart window (see
// Restarts, failovers and restores) answers that it grants nothing for a
// known time: the lease it may have lost counts as held until then, as a
// restarted Redlock node abstains; TryLock's error matches
// dlock.ErrNotObtained and says how long, and Lock waits it out.
//
// Close waits 1.5 seconds at most for a database that does not answer,
// for the releases of the leases still held and then for the clean-ups
// (0.2 more when a session-mode release waits for its connection, which
// a check holds until the lease's Until: it goes on in the background);
// what it could not free expires within its TTL. A Lock or TryLock under
// way returns at once, with an error matching both ErrClosed and
// dlock.ErrNotObtained.
//
// None of this costs a round trip: an uncontended Lock and its Release
// take one statement each in lease mode, the lock wait being set in the
// acquire statement itself, and a connection's server, version and lock
// wait are read with what mysqllock already reads when it first takes
// the connection.
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
// dlock.ErrKindMismatch). No push wake-ups across Clients in lease mode
// (see Waiting). Fenced writes are package fence's (see Fencing).
//
// # Limits
//
//   - A holder paused past its lease can still write to a resource that
//     does not check its fence: check it in the writer's transaction.
//   - Fences assume the database's clock does not step back.
//   - A restored or failed-over database can grant a lock again while an
//     old lease is valid unless restart detection sees it: not covered are
//     a failover before any attempt recorded the identity, a replica with
//     the same host, port and server_id, a proxy that keeps connections
//     across a failover or restart, a restore of the table alone without
//     WithRestartWindow, and anything with detection off (see Restarts,
//     failovers and restores).
//   - Any account that may connect can block (not hold) a SessionMutex by
//     its GET_LOCK name; use lease mode, or a secret in the name.
//   - Lease-mode waiters on other Clients poll (64ms at most by default).
//   - Tested on MariaDB 10.11 only.
//
// # See also
//
// How the row is taken, the session checked, fences computed and
// interrupted attempts cleaned up:
// https://github.com/dlock-go/dlock/blob/main/docs/ARCHITECTURE.md#mysqllock.
// Measured behaviour under faults:
// https://github.com/dlock-go/dlock/blob/main/docs/SAFETY.md.
// Package fence checks these fences in other resources.
package mysqllock
