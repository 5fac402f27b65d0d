package pglock

import (
	"errors"
	"fmt"
	"github.com/dlock-go/dlock/fence"
	"strings"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/dblease"
	"github.com/dlock-go/dlock/internal/lease"
	"github.com/jackc/pgx/v5/pgconn"
)

var (
	// ErrClosed is dlock.ErrClosed: it is returned by every call on a closed
	// Client, and is the cause wrapped in dlock.ErrLost for leases still held
	// when it was closed. A Lock or TryLock that is under way when the Client
	// is closed, or begins after, returns an error matching both ErrClosed and
	// dlock.ErrNotObtained.
	ErrClosed = dlock.ErrClosed

	// ErrSessionLost is the cause wrapped in dlock.ErrLost when the
	// connection that held a session-mode lock failed, or the database
	// ended its session (pg_terminate_backend, idle_session_timeout, a
	// restart): the advisory lock went with the session. The lock's row
	// stays held until it expires, no sooner than the lease's Until, or
	// until the holder calls Release.
	ErrSessionLost = errors.New("pglock: the session holding the advisory lock ended")

	// ErrStaleFence is returned by CheckFence and WriteFenced when a higher
	// fence than the caller's has already been written to the resource:
	// another holder took the lock after the caller's lease ended. Nothing
	// is written. It is fence.ErrStale, and the error that matches it a
	// *fence.StaleError, as from package fence's guards.
	ErrStaleFence = fence.ErrStale

	// ErrNotReentrant is returned by Lock and TryLock when ctx carries a
	// lease (from Lease.Context) that already holds the same lock: waiting
	// would deadlock. It is dlock.ErrNotReentrant.
	ErrNotReentrant = dlock.ErrNotReentrant
)

func init() {
	lease.RegisterCause(ErrSessionLost, "session_lost")
}

// PostgreSQL error codes that describe names.
const (
	codeUndefinedTable  = "42P01"
	codeUndefinedColumn = "42703"
	codeUndefinedObject = "42704"
	codeNoPrivilege     = "42501"
	codeReadOnly        = "25006" // read_only_sql_transaction
)

// PostgreSQL error codes of failures that a concurrent statement causes,
// and that running the statement again gets past: see transient.
const (
	codeSerialization = "40001" // serialization_failure
	codeDeadlock      = "40P01" // deadlock_detected
	codeLockTimeout   = "55P03" // lock_not_available: lock_timeout passed
)

// transient reports whether err is a failure that a concurrent statement
// caused, and that running the statement again at once gets past: a
// serialization failure, a deadlock, or a wait for a row's lock that
// lock_timeout cut short. The statement's transaction rolled back.
// pglock runs its statements at READ COMMITTED (see beginTx), where the
// first does not arise; it is handled all the same. An attempt at a lock
// does not make a statement again for the last (see rowLocked).
func transient(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case codeSerialization, codeDeadlock, codeLockTimeout:
		return true
	}
	return false
}

// rowLocked reports whether err says that a statement waited for a row's
// lock, held by another transaction, until lock_timeout ran out (see
// settings): for an attempt at a lock, the lock is held.
func rowLocked(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == codeLockTimeout
}

// interrupted reports whether err, an unavailable one, may be pgx's for a
// statement that the end of its context interrupted as well as the
// database's own failure: a connection closed (pgx closes one whose
// statement a context interrupted), or a statement cancelled (57014: the
// cancel request of a pool built with CancelRequestContextWatcherHandler,
// as well as statement_timeout).
func interrupted(err error) bool {
	var pgErr *pgconn.PgError
	return errors.Is(err, pgconn.ErrConnClosed) || errors.As(err, &pgErr) && pgErr.Code == "57014"
}

// unavailable reports whether err says that the database could not be
// reached or could not answer, in a way that heals: a connection refused,
// reset, closed or silent; a server shutting down, starting up or in
// recovery (57P01, 57P02, 57P03), out of connections or other resources
// (class 53), a connection failure it reports (class 08), a statement it
// cancelled (57014: statement_timeout), an I/O error (58000, 58030); or a
// read-only transaction (25006): a standby not promoted yet, or a primary
// fenced read-only for a switchover, both of which a failover heals.
// What waiting does not heal is not: a refused login or permission, a
// missing table, a closed pool, a TLS failure.
func unavailable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code[:min(2, len(pgErr.Code))] {
		case "08", "53":
			return true
		case "57":
			return pgErr.Code != "57P04" // database_dropped
		}
		switch pgErr.Code {
		case "58000", "58030", codeReadOnly:
			return true
		}
		return false
	}
	return errors.Is(err, pgconn.ErrConnClosed) || dblease.NetFault(err)
}

// describe turns the failure of doing what to the lock or resource name
// into an error that says what to do about it.
func (c *Client) describe(what, name string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		for _, f := range []string{"pg_control_system", "pg_current_wal_lsn", "pg_walfile_name", "pg_postmaster_start_time"} {
			if strings.Contains(pgErr.Message, f) {
				return fmt.Errorf("pglock: %s %q: %w (restart detection reads the server's identity and start with pg_control_system(), pg_current_wal_lsn(), pg_walfile_name() and pg_postmaster_start_time(): let the role execute them, or turn detection off with WithoutRestartDetection where the server's copies never lag)", what, name, err)
			}
		}
		switch pgErr.Code {
		case codeUndefinedTable:
			return fmt.Errorf("pglock: %s %q: %w (the objects of table %s are missing: call Client.Migrate, or run the SQL of SchemaSQL)",
				what, name, err, c.core.Cfg.Table)
		case codeUndefinedColumn:
			return fmt.Errorf("pglock: %s %q: %w (table %s is not pglock's: give WithTable another name)", what, name, err, c.core.Cfg.Table)
		case codeUndefinedObject:
			if !strings.Contains(pgErr.Message, "idle_session_timeout") {
				break
			}
			return fmt.Errorf("pglock: %s %q: %w (session mode needs PostgreSQL 14 or later, for idle_session_timeout)", what, name, err)
		case codeReadOnly:
			return fmt.Errorf("pglock: %s %q: %w (the transaction is read-only: default_transaction_read_only is on, for the server, the database or the role, or the server is a standby; pglock writes its rows, and does not override the setting: Lock waits until the server takes writes, as after a switchover, and TryLock reports it unavailable; connect to a primary, with default_transaction_read_only off)", what, name, err)
		case codeNoPrivilege:
			return fmt.Errorf("pglock: %s %q: %w (grant the role SELECT, INSERT and UPDATE on %s and %s_fences, and USAGE on %s_fence_seq)",
				what, name, err, c.core.Cfg.Table, c.core.Cfg.Table, c.core.Cfg.Table)
		}
	}
	return fmt.Errorf("pglock: %s %q: %w", what, name, err)
}

// isServerError reports whether err is an error the database returned, as
// opposed to a failure to reach it: the statement did not run.
func isServerError(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr)
}

// endedByServer reports whether err is the database's word that it ended
// the session (a FATAL error: pg_terminate_backend, idle_session_timeout,
// a shutdown), so that whatever the session held is gone.
func endedByServer(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	sev := pgErr.SeverityUnlocalized
	if sev == "" {
		sev = pgErr.Severity
	}
	return sev == "FATAL" || sev == "PANIC"
}

// staleFence returns the error of a write to resource with fence f, refused
// because newest has been written.
func staleFence(resource string, f, newest uint64) error {
	return &fence.StaleError{Resource: resource, Fence: f, Newest: newest}
}
