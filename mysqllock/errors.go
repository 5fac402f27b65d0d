package mysqllock

import (
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/dblease"
	"github.com/dlock-go/dlock/internal/lease"
	"github.com/go-sql-driver/mysql"
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

// errGetLockNull is the error of a GET_LOCK that returned NULL at once:
// the server could not take it (out of memory, the session killed).
var errGetLockNull = errors.New("GET_LOCK returned NULL")

func init() {
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

// rowLocked reports whether err says that a statement waited for a row's
// lock, held by another transaction, until innodb_lock_wait_timeout ran
// out (see lockWait): for an attempt at a lock, the lock is held.
func rowLocked(err error) bool {
	var my *mysql.MySQLError
	return errors.As(err, &my) && my.Number == errLockWaitTimeout
}

// Error numbers with which the server says that it cannot answer now, in
// a way that heals (see unavailable).
var unavailableNumbers = map[uint16]bool{
	// Out of memory or resources; too many connections, of the server or
	// of the account.
	1037: true, 1038: true, 1041: true, 1040: true, 1203: true,
	// The session ended by the server (see endedByServer), and connections
	// aborted.
	errShutdown: true, errConnKilled: true, errClientIdle: true, errServerGone: true, errServerLostIn: true,
	1152: true, 1184: true,
	// Network read and write errors and timeouts.
	1158: true, 1159: true, 1160: true, 1161: true,
	// A statement interrupted (KILL QUERY) or timed out (MariaDB's
	// max_statement_time, MySQL's max_execution_time).
	1317: true, 1969: true, 3024: true,
	// A Galera node not ready: WSREP has not yet prepared node for
	// application use.
	1047: true,
	// Read-only: a replica, or a primary fenced for a switchover.
	errReadOnly: true, errReadOnlyTx: true, 1836: true,
}

// unavailable reports whether err says that the database could not be
// reached or could not answer, in a way that heals: a connection refused,
// reset, closed or silent (the driver's invalid connection, a bad
// connection); a server shutting down, out of connections or resources,
// a session it killed or a statement it interrupted or timed out; or a
// read-only server (read_only, super_read_only, a replica), which a
// failover or the end of a switchover heals. What waiting does not heal
// is not: a refused login or privilege, a missing table, a closed
// *sql.DB, a TLS failure.
func unavailable(err error) bool {
	var my *mysql.MySQLError
	if errors.As(err, &my) {
		return unavailableNumbers[my.Number]
	}
	return errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, driver.ErrBadConn) ||
		errors.Is(err, mysql.ErrPktSync) || errors.Is(err, mysql.ErrPktSyncMul) ||
		errors.Is(err, errGetLockNull) || dblease.NetFault(err)
}

// describe turns the failure of doing what to the lock called name into
// an error that says what to do about it.
func (c *Client) describe(what, name string, err error) error {
	var my *mysql.MySQLError
	if errors.As(err, &my) {
		switch my.Number {
		case errNoSuchTable:
			return fmt.Errorf("mysqllock: %s %q: %w (table %s is missing: call Client.Migrate, or run the SQL of SchemaSQL)", what, name, err, c.core.Cfg.Table)
		case errBadField:
			return fmt.Errorf("mysqllock: %s %q: %w (table %s is not mysqllock's: give WithTable another name)", what, name, err, c.core.Cfg.Table)
		case errTableAccess, errDBAccess:
			return fmt.Errorf("mysqllock: %s %q: %w (grant the account SELECT, INSERT and UPDATE on %s)", what, name, err, c.core.Cfg.Table)
		case errAccessDenied:
			return fmt.Errorf("mysqllock: %s %q: %w (check the user and password of the DSN)", what, name, err)
		case errBadDB:
			return fmt.Errorf("mysqllock: %s %q: %w (check the database name of the DSN)", what, name, err)
		case errReadOnlyTx, errReadOnly:
			return fmt.Errorf("mysqllock: %s %q: %w (the server or the session is read-only: transaction_read_only (tx_read_only), read_only or super_read_only is on, or the server is a replica; mysqllock writes its rows, and needs a server that takes writes: Lock waits until it does, as after a switchover, and TryLock reports it unavailable)", what, name, err)
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
