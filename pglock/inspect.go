package pglock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/dblease"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Every Client is a dlock.Admin.
var _ dlock.Admin = (*Client)(nil)

// Inspect reports who holds the lock called name, in either mode, and for
// how long, in one statement on the database's clock. Info.Kind is
// dlock.KindMutex while the row is held and dlock.KindFree otherwise (a
// name never locked included); Info.Fence is the fence of the latest
// grant, which is the holder's own; Info.TTL is the time left on the row.
// A holder in session mode has Where naming the backend that holds its
// advisory lock. Waiters wait for a notice, not in a queue, so
// Info.Waiters is always 0: pglock cannot count them. A missing table
// reports the lock free. Inspect writes nothing.
func (c *Client) Inspect(ctx context.Context, name string) (dlock.Info, error) {
	if err := checkName("lock", name); err != nil {
		return dlock.Info{}, err
	}
	if err := c.usable(); err != nil {
		return dlock.Info{}, err
	}
	var (
		token     string
		fence, ms int64
		pid       int32
	)
	err := queryRow(ctx, c.pool, []any{&token, &fence, &ms, &pid}, c.sql.inspect, name, advisoryKey(c.core.Cfg.Table, name))
	switch {
	case errors.Is(err, pgx.ErrNoRows), isUndefinedTable(err):
		return dblease.Info(name, "", 0, 0, ""), nil
	case err != nil:
		return dlock.Info{}, c.describe("inspect", name, err)
	}
	var where string
	if pid != 0 {
		where = fmt.Sprintf("session mode, advisory lock held by backend %d", pid)
	}
	return dblease.Info(name, token, uint64(max(fence, 0)), time.Duration(ms)*time.Millisecond, where), nil
}

// ForceUnlock is an operator's override: it frees the lock called name
// whoever holds it and notifies its waiters, and reports whether it was
// held. A holder in session mode loses its session first
// (pg_terminate_backend, which takes the same role as the holder's or
// pg_signal_backend), so that it learns at once, with an error matching
// ErrSessionLost, and its advisory lock is free for the next holder. A
// holder in lease mode learns at its next renewal, when its lease ends
// with an error matching dlock.ErrTakenOver; until then, only fences tell
// the old holder and the new one apart.
func (c *Client) ForceUnlock(ctx context.Context, name string) (bool, error) {
	if err := checkName("lock", name); err != nil {
		return false, err
	}
	if err := c.usable(); err != nil {
		return false, err
	}
	rows, err := c.pool.Query(ctx, c.sql.terminate, advisoryKey(c.core.Cfg.Table, name))
	if err != nil {
		return false, c.describe("force unlock", name, err)
	}
	ended, err := pgx.CollectRows(rows, pgx.RowTo[bool])
	if err != nil {
		return false, fmt.Errorf("pglock: force unlock %q: ending the session that holds its advisory lock: %w (the role needs to be the holder's, or a member of pg_signal_backend)", name, err)
	}
	if len(ended) > 0 {
		c.awaitUnlocked(ctx, advisoryKey(c.core.Cfg.Table, name))
	}
	var tag pgconn.CommandTag
	err = again(ctx, func() (err error) {
		tag, err = exec(ctx, c.pool, c.sql.forceUnlock, name, c.obj.channel)
		return err
	})
	if isUndefinedTable(err) {
		return len(ended) > 0, nil
	}
	if err != nil {
		return len(ended) > 0, c.describe("force unlock", name, err)
	}
	return tag.RowsAffected() == 1 || len(ended) > 0, nil
}

// unlockWait bounds how long ForceUnlock waits for the sessions it ended
// to let go of the advisory lock.
const unlockWait = 2 * time.Second

// awaitUnlocked waits, up to unlockWait, until no session holds advisory
// lock key: pg_terminate_backend only signals a backend, which frees its
// locks as it exits, a little later. Otherwise a waiter woken by the
// release notice could find the lock still held, and wait a backoff more.
func (c *Client) awaitUnlocked(ctx context.Context, key int64) {
	ctx, cancel := context.WithTimeout(ctx, unlockWait)
	defer cancel()
	for {
		var held bool
		err := c.pool.QueryRow(ctx, c.sql.advisoryHeld, key).Scan(&held)
		if err != nil || !held {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// isUndefinedTable reports whether err says that the Client's table is
// missing: then no lock is held in it.
func isUndefinedTable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == codeUndefinedTable
}
