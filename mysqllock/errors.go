package mysqllock

import (
	"context"
	"errors"
	"fmt"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/lease"
	"github.com/dlock-go/dlock/internal/sqllease"
	"github.com/go-sql-driver/mysql"
)

var (
	// ErrClosed is returned by every call on a closed Client, and is the
	// cause wrapped in dlock.ErrLost for leases still held when it was
	// closed. A Lock or TryLock that is under way when the Client is
	// closed, or begins after, returns an error matching both ErrClosed
	// and dlock.ErrNotObtained.
	ErrClosed = errors.New("mysqllock: client closed")

	// ErrSessionLost is the cause wrapped in dlock.ErrLost when the
	// connection that held a session-mode lock failed, or the database
	// ended its session (KILL CONNECTION, wait_timeout, a restart): the
	// GET_LOCK lock went with the session. The lock's row stays held until
	// it expires, no sooner than the lease's Until, or until the holder
	// calls Release.
	ErrSessionLost = errors.New("mysqllock: the session holding the GET_LOCK lock ended")

	// ErrNotReentrant is returned by Lock and TryLock when ctx carries a
	// lease (from Lease.Context) that already holds the same lock: waiting
	// would deadlock. It is dlock.ErrNotReentrant.
	ErrNotReentrant = dlock.ErrNotReentrant
)

func init() {
	lease.RegisterCause(ErrClosed, "closed")
	lease.RegisterCause(ErrSessionLost, "session_lost")
}

// MySQL error numbers that say what to do.
const (
	errDupEntry     = 1062
	errNoSuchTable  = 1146
	errBadField     = 1054
	errTableAccess  = 1142
	errDBAccess     = 1044
	errAccessDenied = 1045
	errBadDB        = 1049
	errNoSuchThread = 1094
	errReadOnlyTx   = 1792 // a statement that writes, in a read-only transaction
	errReadOnly     = 1290 // the server runs with --read-only (or another option that forbids the statement)
)

// Error numbers of failures that a concurrent statement causes, and that
// running the statement again gets past: see transient.
const (
	errLockWaitTimeout = 1205 // innodb_lock_wait_timeout passed, waiting for a row's lock
	errDeadlock        = 1213
)

// transient reports whether err is a failure that a concurrent statement
// caused, and that running the statement again at once gets past: a
// deadlock (InnoDB rolled the statement's transaction back) or a lock wait
// that timed out (it rolled the statement back). mysqllock's statements
// are each a transaction of their own (see conn), so either way nothing
// of the statement is left.
func transient(err error) bool {
	var my *mysql.MySQLError
	return errors.As(err, &my) && (my.Number == errDeadlock || my.Number == errLockWaitTimeout)
}

// describe turns the failure of doing what to the lock called name into
// an error that says what to do about it.
func (c *Client) describe(what, name string, err error) error {
	var my *mysql.MySQLError
	if errors.As(err, &my) {
		switch my.Number {
		case errNoSuchTable:
			return fmt.Errorf("mysqllock: %s %q: %w (table %s is missing: call Client.Migrate, or run the SQL of SchemaSQL)", what, name, err, c.cfg.table)
		case errBadField:
			return fmt.Errorf("mysqllock: %s %q: %w (table %s is not mysqllock's: give WithTable another name)", what, name, err, c.cfg.table)
		case errTableAccess, errDBAccess:
			return fmt.Errorf("mysqllock: %s %q: %w (grant the account SELECT, INSERT and UPDATE on %s)", what, name, err, c.cfg.table)
		case errAccessDenied:
			return fmt.Errorf("mysqllock: %s %q: %w (check the user and password of the DSN)", what, name, err)
		case errBadDB:
			return fmt.Errorf("mysqllock: %s %q: %w (check the database name of the DSN)", what, name, err)
		case errReadOnlyTx, errReadOnly:
			return fmt.Errorf("mysqllock: %s %q: %w (the server or the session is read-only: transaction_read_only (tx_read_only), read_only or super_read_only is on, or the server is a replica; mysqllock writes its rows, and needs a server that takes writes)", what, name, err)
		}
	}
	return fmt.Errorf("mysqllock: %s %q: %w", what, name, err)
}

// isServerError reports whether err is an error the database returned for
// a statement, as opposed to a failure to reach it: the statement did not
// run. A session the server ended is not one: see endedByServer.
func isServerError(err error) bool {
	var my *mysql.MySQLError
	return errors.As(err, &my) && !endedByServer(err)
}

// Error numbers with which the server reports that it ended the session.
const (
	errConnKilled   = 1927 // MariaDB: connection was killed
	errShutdown     = 1053 // server shutdown in progress
	errClientIdle   = 4031 // MySQL 8: disconnected for inactivity (wait_timeout)
	errServerGone   = 2006
	errServerLostIn = 2013
)

// endedByServer reports whether err is the database's word that it ended
// the session, so that whatever the session held is gone.
func endedByServer(err error) bool {
	var my *mysql.MySQLError
	if !errors.As(err, &my) {
		return false
	}
	switch my.Number {
	case errConnKilled, errShutdown, errClientIdle, errServerGone, errServerLostIn:
		return true
	}
	return false
}

// cancelled returns the context error behind a failed call, or nil.
func cancelled(ctx context.Context, err error) error { return sqllease.Cancelled(ctx, err) }

// sessionLost returns the cause of a loss of the session: ErrSessionLost
// and the connection's error.
func sessionLost(err error) error { return fmt.Errorf("%w: %w", ErrSessionLost, err) }
