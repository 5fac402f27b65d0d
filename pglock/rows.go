package pglock

import (
	"context"
	"time"

	"github.com/dlock-go/dlock/internal/background"
	"github.com/dlock-go/dlock/internal/dblease"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// A sender runs a batch of statements in one round trip: the pool, or
// the connection a session-mode lease keeps.
type sender interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// take runs ensure.sql for lock name and then acquire with args, in one
// round trip and one transaction (see send), and scans acquire's row into dest. It
// returns pgx.ErrNoRows if acquire returned none.
func (c *Client) take(ctx context.Context, via sender, name, acquire string, dest []any, args ...any) error {
	b := &pgx.Batch{}
	b.Queue(c.sql.ensure, name)
	b.Queue(acquire, args...)
	br := send(ctx, via, b)
	_, err := br.Exec()
	if err == nil {
		err = br.QueryRow().Scan(dest...)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// release frees the row of lock name if token holds it, and notifies
// waiters. It reports whether it did.
func (c *Client) release(ctx context.Context, name, token string) (bool, error) {
	tag, err := exec(ctx, c.pool, c.sql.release, name, token, c.obj.channel)
	return tag.RowsAffected() == 1, err
}

// free releases the row now if the database answers within
// dblease.LookTimeout, whether or not ctx is done, and otherwise in the
// background (see abandon).
func (c *Client) free(ctx context.Context, name, token string) { c.leases.Free(ctx, name, token) }

// abandon frees, in the background, the row of lock name that an
// interrupted statement may have left held by token. pid is the backend
// that ran a statement which may have taken the row, or 0 if none did
// (an interrupted release can only free it).
//
// The clean-up looks until the row is freed, or is found not held by
// token once backend pid has ended: the database ends a backend only
// after the statement it was running has committed or rolled back, so
// that no statement of it can land any more. While the backend lives (its
// connection is closed, but the statement may be buffered on its way, or
// running), the clean-up looks again, with a backoff, however long that
// takes: until the Client is closed, and Close waits for it (see Close).
func (c *Client) abandon(name, token string, pid uint32) {
	c.leases.Clean(func(ctx context.Context) background.Outcome { return c.lookAgain(ctx, name, token, pid) })
}

// lookAgain is one look of a clean-up (see abandon), within ctx's
// deadline (see dblease.Leases.Clean).
func (c *Client) lookAgain(ctx context.Context, name, token string, pid uint32) background.Outcome {
	// The check comes first, in a statement of its own, so that a backend
	// found ended has committed whatever it ran before the release looks.
	b := &pgx.Batch{}
	b.Queue("SELECT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $1::int)", int64(pid))
	b.Queue(c.sql.release, name, token, c.obj.channel)
	br := send(ctx, c.pool, b)
	var alive bool
	err := br.QueryRow().Scan(&alive)
	var tag pgconn.CommandTag
	if err == nil {
		tag, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	switch {
	case isServerError(err):
		return background.Nothing // the table is gone, or not ours: nothing to free
	case err != nil:
		return background.Unreachable
	case tag.RowsAffected() == 1 || !alive:
		return background.Cleaned
	}
	// The backend lives: what it runs may still take the row. Look again.
	return background.Unreachable
}

// refresh extends the leases gs to their TTL from now, in one statement.
// held[i] reports whether gs[i] still holds its row.
func (c *Client) refresh(ctx context.Context, gs []*dblease.Grant) (held []bool, err error) {
	names, tokens, ttls := make([]string, len(gs)), make([]string, len(gs)), make([]int64, len(gs))
	for i, g := range gs {
		names[i], tokens[i], ttls[i] = g.Key(), g.Token(), dblease.Units(g.TTL(), time.Millisecond)
	}
	still := make(map[[2]string]bool, len(gs))
	var name, token string
	if err := query(ctx, c.pool, []any{&name, &token}, func() error {
		still[[2]string{name, token}] = true
		return nil
	}, c.sql.refresh, names, tokens, ttls); err != nil {
		return nil, err
	}
	held = make([]bool, len(gs))
	for i, g := range gs {
		held[i] = still[[2]string{g.Key(), g.Token()}]
	}
	return held, nil
}
