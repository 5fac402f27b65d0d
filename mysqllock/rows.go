package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/dlock-go/dlock/internal/background"
	"github.com/dlock-go/dlock/internal/dblease"
	"github.com/go-sql-driver/mysql"
)

// A querier runs statements: the pool, or a connection of it.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// take tries to take lock name for token for ttl microseconds on conn,
// unless the server's clock is before gate (see Client.gate): acquire.sql,
// and if that takes nothing, holder.sql to learn why, and create.sql if
// the row does not exist. It returns the grant's fence, or 0 and how long
// the holder's row has left (0 if not known). The statements that write
// wait at most dblease.LockWait for the row's lock (see lockWait).
func (c *Client) take(ctx context.Context, conn *conn, name, token string, ttl, gate int64) (fence uint64, left time.Duration, err error) {
	res, err := conn.ExecContext(ctx, conn.lockWait(fill(c.sql.acquire, token, ttl, name, gate)))
	if err != nil {
		return 0, 0, err
	}
	if fence, ok := granted(res); ok {
		return fence, 0, nil
	}
	var us int64
	err = conn.QueryRowContext(ctx, fill(c.sql.holder, name)).Scan(&us)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		res, err := conn.ExecContext(ctx, conn.lockWait(fill(c.sql.create, name, token, ttl, gate)))
		if isDuplicate(err) {
			return 0, 0, nil // another attempt made the row first
		}
		if err != nil {
			return 0, 0, err
		}
		fence, _ := granted(res)
		return fence, 0, nil
	case err != nil:
		return 0, 0, err
	case us > 0:
		return 0, time.Duration(us) * time.Microsecond, nil
	}
	return 0, time.Millisecond, nil // freed or expired since: try again soon
}

// granted returns the fence of a statement that took a row, which
// LAST_INSERT_ID(expr) put in the OK packet, and whether it took one.
func granted(res sql.Result) (uint64, bool) {
	n, err := res.RowsAffected()
	if err != nil || n != 1 {
		return 0, false
	}
	id, err := res.LastInsertId()
	if err != nil || id <= 0 {
		return 0, false
	}
	return uint64(id), true
}

// isDuplicate reports whether err is a duplicate-key error.
func isDuplicate(err error) bool {
	var my *mysql.MySQLError
	return errors.As(err, &my) && my.Number == errDupEntry
}

// release frees the row of lock name if token holds it, and wakes the
// Client's waiters of it. It reports whether it did.
func (c *Client) release(ctx context.Context, name, token string) (bool, error) {
	var n int64
	err := c.with(ctx, func(q querier) error {
		res, err := q.ExecContext(ctx, fill(c.sql.release, name, token))
		if err == nil {
			n, err = res.RowsAffected()
		}
		return err
	})
	if n == 1 {
		c.waiters.Wake(name)
	}
	return n == 1, err
}

// free releases the row now if the database answers within
// dblease.LookTimeout, whether or not ctx is done, and otherwise in the
// background (see abandon).
func (c *Client) free(ctx context.Context, name, token string) { c.leases.Free(ctx, name, token) }

// abandon frees, in the background, the row of lock name that an
// interrupted statement may have left held by token. conn is the server's
// ID of the connection that ran a statement which may have taken the row,
// or 0 if none did (an interrupted release can only free it).
//
// The clean-up looks until the row is freed, or is found not held by
// token once connection conn has ended: the server ends a connection only
// after the statement it was running has committed or rolled back, so
// that no statement of it can land any more. While it lives, the clean-up
// looks again, with a backoff: until the Client is closed, and Close
// waits for it (see Close).
func (c *Client) abandon(name, token string, conn int64) {
	c.leases.Clean(func(ctx context.Context) background.Outcome { return c.lookAgain(ctx, name, token, conn) })
}

// lookAgain is one look of a clean-up (see abandon), within ctx's
// deadline (see dblease.Leases.Clean).
func (c *Client) lookAgain(ctx context.Context, name, token string, conn int64) background.Outcome {
	// The check comes first, so that a connection found ended has
	// committed whatever it ran before the release looks.
	var alive, n int64
	err := c.with(ctx, func(q querier) error {
		if conn != 0 {
			if err := q.QueryRowContext(ctx, fill(c.sql.alive, conn)).Scan(&alive); err != nil {
				return err
			}
		}
		res, err := q.ExecContext(ctx, fill(c.sql.release, name, token))
		if err == nil {
			n, err = res.RowsAffected()
		}
		return err
	})
	switch {
	case isServerError(err):
		return background.Nothing // the table is gone, or not ours: nothing to free
	case err != nil:
		return background.Unreachable
	}
	if n == 1 {
		c.waiters.Wake(name)
		return background.Cleaned
	}
	if alive == 0 {
		return background.Cleaned
	}
	// The connection lives: what it runs may still take the row. Look
	// again.
	return background.Unreachable
}

// refresh extends the leases gs to their TTL from now, in one statement
// per TTL among them (the watchdog's batches usually share one). held[i]
// reports whether gs[i] still holds its row.
func (c *Client) refresh(ctx context.Context, gs []*dblease.Grant) (held []bool, err error) {
	held = make([]bool, len(gs))
	byTTL := make(map[int64][]int)
	for i, g := range gs {
		ttl := dblease.Units(g.TTL(), time.Microsecond)
		byTTL[ttl] = append(byTTL[ttl], i)
	}
	err = c.with(ctx, func(q querier) error {
		for ttl, at := range byTTL {
			if err := c.refreshTTL(ctx, q, gs, at, ttl, held); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return held, nil
}

// refreshTTL extends the leases gs[i], for each i of at, which share the
// TTL ttl, to it from now, on q, and sets held[i] to whether gs[i] still
// holds its row.
func (c *Client) refreshTTL(ctx context.Context, q querier, gs []*dblease.Grant, at []int, ttl int64, held []bool) error {
	names, tokens := make([]string, len(at)), make([]string, len(at))
	for j, i := range at {
		names[j], tokens[j] = gs[i].Key(), gs[i].Token()
	}
	res, err := q.ExecContext(ctx, fill(c.sql.refresh, names, tokens, ttl))
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err == nil && n == int64(len(at)) {
		for _, i := range at {
			held[i] = true
		}
		return nil
	}
	// Some lease lost its row (or a row's expiry did not change, which
	// the count leaves out): ask which are still held.
	rows, err := q.QueryContext(ctx, fill(c.sql.still, names, tokens))
	if err != nil {
		return err
	}
	defer rows.Close()
	still := make(map[[2]string]bool, len(at))
	for rows.Next() {
		var name, token []byte
		if err := rows.Scan(&name, &token); err != nil {
			return err
		}
		still[[2]string{string(name), string(token)}] = true
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, i := range at {
		held[i] = still[[2]string{gs[i].Key(), gs[i].Token()}]
	}
	return nil
}
