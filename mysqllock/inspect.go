package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/dblease"
	"github.com/go-sql-driver/mysql"
)

// Every Client is a dlock.Admin.
var _ dlock.Admin = (*Client)(nil)

// Inspect reports who holds the lock called name, in either mode, and for
// how long, in one statement on the database's clock. Info.Kind is
// dlock.KindMutex while the row is held and dlock.KindFree otherwise (a
// name never locked included); Info.Fence is the fence of the latest
// grant, which is the holder's own; Info.TTL is the time left on the row.
// A holder in session mode has Where naming the connection that holds its
// GET_LOCK lock. Waiters poll, not in a queue, so Info.Waiters is always
// 0: mysqllock cannot count them. A missing table reports the lock free.
// Inspect writes nothing.
func (c *Client) Inspect(ctx context.Context, name string) (dlock.Info, error) {
	if err := checkName(name); err != nil {
		return dlock.Info{}, err
	}
	if err := c.usable(); err != nil {
		return dlock.Info{}, err
	}
	var (
		token   []byte
		fence   uint64
		us, who int64
	)
	err := c.with(ctx, func(q querier) error {
		return q.QueryRowContext(ctx, fill(c.sql.inspect, name, sessionLockName(c.core.Cfg.Table, name))).Scan(&token, &fence, &us, &who)
	})
	switch {
	case errors.Is(err, sql.ErrNoRows), isNoSuchTable(err):
		return dblease.Info(name, "", 0, 0, ""), nil
	case err != nil:
		return dlock.Info{}, c.describe("inspect", name, err)
	}
	var where string
	if who != 0 {
		where = fmt.Sprintf("session mode, GET_LOCK lock held by connection %d", who)
	}
	return dblease.Info(name, string(token), fence, time.Duration(us)*time.Microsecond, where), nil
}

// ForceUnlock is an operator's override: it frees the lock called name
// whoever holds it, and reports whether it was held. A holder in session
// mode loses its connection first (KILL CONNECTION, which needs the same
// account as the holder's, or the CONNECTION ADMIN or SUPER privilege),
// so that it learns within its check interval, with an error matching
// ErrSessionLost, and its GET_LOCK lock is free for the next holder. A
// holder in lease mode learns at its next renewal, when its lease ends
// with an error matching dlock.ErrTakenOver; until then, only fences tell
// the old holder and the new one apart.
func (c *Client) ForceUnlock(ctx context.Context, name string) (bool, error) {
	if err := checkName(name); err != nil {
		return false, err
	}
	if err := c.usable(); err != nil {
		return false, err
	}
	var who int64
	if err := c.with(ctx, func(q querier) error {
		return q.QueryRowContext(ctx, fill("SELECT COALESCE(IS_USED_LOCK(?), 0)", sessionLockName(c.core.Cfg.Table, name))).Scan(&who)
	}); err != nil {
		return false, c.describe("force unlock", name, err)
	}
	if who != 0 {
		err := c.with(ctx, func(q querier) error { _, err := q.ExecContext(ctx, fill("KILL CONNECTION ?", who)); return err })
		if err != nil && !isUnknownThread(err) {
			return false, fmt.Errorf("mysqllock: force unlock %q: ending connection %d, which holds its GET_LOCK lock: %w (the account needs to be the holder's, or to have the CONNECTION ADMIN or SUPER privilege)", name, who, err)
		}
	}
	var n int64
	err := c.again(ctx, func(q querier) error {
		res, err := q.ExecContext(ctx, fill(c.sql.forceUnlock, name))
		if err == nil {
			n, err = res.RowsAffected()
		}
		return err
	})
	if isNoSuchTable(err) {
		return who != 0, nil
	}
	if err != nil {
		return who != 0, c.describe("force unlock", name, err)
	}
	if n == 1 {
		c.core.Waiters.Wake(name)
	}
	return n == 1 || who != 0, nil
}

// isUnknownThread reports whether err says that the connection to kill
// has gone already.
func isUnknownThread(err error) bool {
	var my *mysql.MySQLError
	return errors.As(err, &my) && my.Number == errNoSuchThread
}

// isNoSuchTable reports whether err says that the Client's table is
// missing: then no lock is held in it.
func isNoSuchTable(err error) bool {
	var my *mysql.MySQLError
	return errors.As(err, &my) && my.Number == errNoSuchTable
}
