package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"time"

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
		c.core.Waiters.Wake(name)
	}
	return n == 1, err
}

// look frees the row of lock name if token holds it, and wakes the
// Client's waiters of it, after asking whether connection conn, if not
// 0, is alive: the check comes first, so that a connection found ended
// has committed whatever it ran before the release looks (see
// dblease.Client.Abandon).
func (c *Client) look(ctx context.Context, name, token string, conn int64) (freed, alive bool, err error) {
	var live, n int64
	err = c.with(ctx, func(q querier) error {
		if conn != 0 {
			if err := q.QueryRowContext(ctx, fill(c.sql.alive, conn)).Scan(&live); err != nil {
				return err
			}
		}
		res, err := q.ExecContext(ctx, fill(c.sql.release, name, token))
		if err == nil {
			n, err = res.RowsAffected()
		}
		return err
	})
	if n == 1 {
		c.core.Waiters.Wake(name)
	}
	return n == 1, live != 0, err
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
