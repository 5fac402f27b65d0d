package pglock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/dlock-go/dlock/internal/dblease"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A Client makes locks on one PostgreSQL database, in one table (see
// WithTable). It owns what its locks share: one connection, taken from the
// pool when the first waiter needs it, that LISTENs for release notices;
// and one renewal scheduler that renews every held lease, lease mode in
// one statement per batch. Create one Client per database and share it; it
// is safe for concurrent use.
//
// A Client borrows connections from the caller's pool and never closes the
// pool. A session-mode lease holds one of the pool's connections for as
// long as it lasts, so size the pool for them. Close the Client before the
// pool: closing a pool waits for every connection to come back.
type Client struct {
	pool    *pgxpool.Pool
	obj     objects
	sql     statements
	notices *listener
	core    *dblease.Client // its options, held leases, the watchdog, and (in Background) the listener and clean-ups
}

// New returns a Client that locks through pool, configured by opts
// (WithTable, WithObserver, WithLogger). New never fails: a nil pool or a
// bad table name is reported by the first call that needs them. Call
// Migrate, or run the SQL of SchemaSQL, before the first lock.
func New(pool *pgxpool.Pool, opts ...ClientOption) *Client {
	cfg := dblease.NewClientConfig(DefaultTable, opts)
	c := &Client{pool: pool}
	obj, err := objectsFor(cfg.Table)
	switch {
	case pool == nil:
		err = errors.New("pglock: New was given a nil *pgxpool.Pool")
	case err == nil:
		err = cfg.Restart.Check("pglock")
	}
	if err == nil {
		c.obj, c.sql = obj, newStatements(obj)
	}
	service := serviceOf(pool)
	c.core = dblease.New(dblease.Dialect{
		Faults: dblease.Faults{Pkg: "pglock", Transient: transient, RowLocked: rowLocked, Unavailable: unavailable,
			Interrupted: interrupted, Service: func() string { return service }},
		ErrClosed: ErrClosed, ErrSessionLost: ErrSessionLost,
		Release: c.release, Refresh: c.refresh, Look: c.look, Describe: c.describe,
		IsServerError: isServerError, EndedByServer: endedByServer,
		MaxFence: maxFence, FenceOutOfRange: c.fenceOutOfRange,
	}, cfg, err)
	c.notices = newListener(c)
	c.core.Wait = c.notices.wait
	return c
}

// serviceOf names the database of pool, for dlock.UnavailableError:
// "postgres" and its address, or addresses.
func serviceOf(pool *pgxpool.Pool) string {
	if pool == nil {
		return "postgres"
	}
	cfg := pool.Config().ConnConfig
	addrs := []string{address(cfg.Host, cfg.Port)}
	for _, f := range cfg.Fallbacks {
		if a := address(f.Host, f.Port); a != addrs[len(addrs)-1] {
			addrs = append(addrs, a)
		}
	}
	return "postgres " + strings.Join(addrs, ",")
}

// address writes a host and port as an address; a host that is a
// directory is a Unix socket's.
func address(host string, port uint16) string {
	if strings.HasPrefix(host, "/") {
		return fmt.Sprintf("%s/.s.PGSQL.%d", host, port)
	}
	return net.JoinHostPort(host, strconv.Itoa(int(port)))
}

// SchemaSQL returns the SQL that creates the objects of a Client whose
// WithTable is table ("" for DefaultTable): the table of locks, the fence
// sequence and the fences table of WriteFenced, each only if it does not
// exist yet, and a statement that moves the sequence up to the database's
// clock in microseconds. Client.Migrate runs it; use it to run your
// migrations yourself. Fences do not depend on running it again after the
// database lost data: every grant lifts its fence to the database's clock
// (see Fencing in the package doc).
func SchemaSQL(table string) (string, error) {
	if table == "" {
		table = DefaultTable
	}
	obj, err := objectsFor(table)
	if err != nil {
		return "", err
	}
	return newStatements(obj).schema, nil
}

// Migrate creates the Client's table, sequence and fences table if they
// do not exist, and moves the sequence up to the database's clock in
// microseconds: the SQL of SchemaSQL, in one transaction and one round
// trip, under an advisory lock so that concurrent callers take turns. It is idempotent;
// call it when your program starts. It looks for the three objects
// first and, when they all exist, does nothing more, so that a role with
// only the grants it needs to lock (see the package doc) can call it;
// creating them needs CREATE on the schema.
func (c *Client) Migrate(ctx context.Context) error {
	if err := c.usable(); err != nil {
		return err
	}
	var exists bool
	if err := c.pool.QueryRow(ctx, c.sql.exists).Scan(&exists); err != nil {
		return fmt.Errorf("pglock: migrating table %s: %w", c.core.Cfg.Table, err)
	}
	if exists {
		return nil
	}
	// One round trip (a query without parameters goes as one simple
	// query, which may hold several statements), so that the transaction
	// is never idle between two of them.
	_, err := c.pool.Exec(ctx, fmt.Sprintf("%s; SELECT pg_advisory_xact_lock(%d); %s; COMMIT",
		beginTx, advisoryKey(c.core.Cfg.Table, "\x00migrate"), c.sql.schema))
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == codeNoPrivilege {
		return fmt.Errorf("pglock: migrating table %s: %w (its objects are missing and the role may not create them: grant it CREATE on the schema, or run the SQL of SchemaSQL as a role that may)", c.core.Cfg.Table, err)
	}
	if err != nil {
		return c.describe("migrating table", c.core.Cfg.Table, err)
	}
	return nil
}

// Close releases every lease the Client still holds, stops renewing,
// finishes the clean-ups of interrupted calls and of leases that ended
// (freeing the row and the advisory lock that a failed or abandoned
// attempt, or a release that did not complete, may have left held), and
// gives back the connections it took from the pool. It waits 1.5 seconds
// at most, for the releases and then the clean-ups (see Faults in the
// package doc): a lock the database could not be reached to free in that
// time expires within its TTL (a session-mode advisory lock goes with its
// connection), and Close reports the failure. It does not close the pool.
// Every held lease ends with dlock.ErrReleased. A Lock or TryLock under way
// returns at once, with an error matching both ErrClosed and
// dlock.ErrNotObtained.
//
// A clean-up waits, before it is done, for the backend that ran an
// interrupted acquire to end, since until then the statement may still
// take the lock: Close returns once nothing of the Client's can land
// any more, or at its timeout.
func (c *Client) Close() error { return c.core.Close(nil) }

// usable returns the error every call on an unusable Client returns.
func (c *Client) usable() error { return c.core.Usable() }
