package mysqllock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/dlock-go/dlock/internal/dblease"
	"github.com/go-sql-driver/mysql"
)

// A Client makes locks on one MySQL or MariaDB database, in one table (see
// WithTable). It owns what its locks share: one renewal scheduler that
// renews every held lease, lease mode in one statement per batch, and the
// wake-ups of its own waiters. Create one Client per database and share
// it; it is safe for concurrent use.
//
// A Client borrows connections from the caller's *sql.DB and never closes
// it. A session-mode lease holds one of its connections for as long as it
// lasts, so size the pool (SetMaxOpenConns) for them. Close the Client
// before the *sql.DB.
type Client struct {
	db       *sql.DB
	sql      statements
	sessions sessions        // what it learnt of the pool's connections
	core     *dblease.Client // its options, held leases, the watchdog, and (in Background) clean-ups
}

// New returns a Client that locks through db, a pool of connections
// opened with github.com/go-sql-driver/mysql (or a driver that speaks the
// same SQL), configured by opts (WithTable, WithObserver, WithLogger).
// New never fails: a nil db or a bad table name is reported by the first
// call that needs them. Call Migrate, or run the SQL of SchemaSQL, before
// the first lock.
func New(db *sql.DB, opts ...ClientOption) *Client {
	cfg := dblease.NewClientConfig(DefaultTable, opts)
	c := &Client{db: db}
	table, err := quoteTable(cfg.Table)
	switch {
	case db == nil:
		err = errors.New("mysqllock: New was given a nil *sql.DB")
	case err == nil:
		err = cfg.Restart.Check("mysqllock")
	}
	if err == nil {
		c.sql = newStatements(table)
	}
	c.core = dblease.New(dblease.Dialect{
		Faults: dblease.Faults{Pkg: "mysqllock", Transient: transient, RowLocked: rowLocked, Unavailable: unavailable,
			Service: c.sessions.server},
		ErrClosed: ErrClosed, ErrSessionLost: ErrSessionLost,
		Release: c.release, Refresh: c.refresh, Look: c.look, Describe: c.describe,
		IsServerError: isServerError, EndedByServer: endedByServer,
		MaxFence: maxFence, FenceOutOfRange: fenceOutOfRange,
	}, cfg, err)
	return c
}

// SchemaSQL returns the SQL that creates the table of a Client whose
// WithTable is table ("" for DefaultTable), if it does not exist yet.
// Client.Migrate runs it; use it to run your migrations yourself. There
// is no sequence to keep: every grant lifts its fence to the database's
// clock (see Fencing in the package doc).
func SchemaSQL(table string) (string, error) {
	if table == "" {
		table = DefaultTable
	}
	quoted, err := quoteTable(table)
	if err != nil {
		return "", err
	}
	return newStatements(quoted).schema, nil
}

// Migrate creates the Client's table if it does not exist: the SQL of
// SchemaSQL. It is idempotent; call it when your program starts. It
// looks for the table first, so that an account with only SELECT, INSERT
// and UPDATE on an existing table can call it; creating the table needs
// the CREATE privilege on the database.
func (c *Client) Migrate(ctx context.Context) error {
	if err := c.usable(); err != nil {
		return err
	}
	err := c.with(ctx, func(q querier) error {
		rows, err := q.QueryContext(ctx, c.sql.exists)
		if err == nil {
			rows.Close()
		}
		return err
	})
	if err == nil {
		return nil
	}
	if !isNoSuchTable(err) {
		return c.describe("migrating table", c.core.Cfg.Table, err)
	}
	if err := c.with(ctx, func(q querier) error { _, err := q.ExecContext(ctx, c.sql.schema); return err }); err != nil {
		var my *mysql.MySQLError
		if errors.As(err, &my) && (my.Number == errTableAccess || my.Number == errDBAccess) {
			return fmt.Errorf("mysqllock: creating table %s: %w (the table is missing and the account may not create it: grant it CREATE on the database, or run the SQL of SchemaSQL as an account that may)", c.core.Cfg.Table, err)
		}
		return c.describe("migrating table", c.core.Cfg.Table, err)
	}
	return nil
}

// Close releases every lease the Client still holds, stops renewing,
// finishes the clean-ups of interrupted calls and of leases that ended
// (freeing the row and the GET_LOCK lock that a failed or abandoned
// attempt, or a release that did not complete, may have left held), and
// gives back the connections it took from the pool. It waits 1.5 seconds
// at most, for the releases and then the clean-ups (see Faults in the
// package doc): a lock the database could not be reached to free in that
// time expires within its TTL (a GET_LOCK lock goes with its connection),
// and Close reports the failure. It does not close the *sql.DB. Every held
// lease ends with dlock.ErrReleased. A Lock or TryLock under way returns
// at once, with an error matching both ErrClosed and dlock.ErrNotObtained.
func (c *Client) Close() error { return c.core.Close(c.core.Waiters.WakeAll) }

// usable returns the error every call on an unusable Client returns.
func (c *Client) usable() error { return c.core.Usable() }

// discard closes a connection that may hold a GET_LOCK lock, or may run a
// statement that takes a lock's row, instead of handing it back to the
// pool: a driver connection that reports driver.ErrBadConn is closed.
// The server then ends the session, and frees its GET_LOCK lock, once it
// reads the end of the connection (after what was sent before it).
func discard(conn *sql.Conn) {
	conn.Raw(func(any) error { return driver.ErrBadConn })
	conn.Close()
}
