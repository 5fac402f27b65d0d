package pglock

import (
	"context"
	"time"

	"github.com/dlock-go/dlock/internal/background"
	"github.com/jackc/pgx/v5"
)

// A sender runs a batch of statements in one round trip: the pool, or
// the connection a session-mode lease keeps.
type sender interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// take runs ensure.sql for lock name and then acquire with args, in one
// round trip and one transaction, and scans acquire's row into dest. It
// returns pgx.ErrNoRows if acquire returned none.
func (c *Client) take(ctx context.Context, via sender, name, acquire string, dest []any, args ...any) error {
	b := &pgx.Batch{}
	b.Queue(c.sql.ensure, name)
	b.Queue(acquire, args...)
	br := via.SendBatch(ctx, b)
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
	tag, err := c.pool.Exec(ctx, c.sql.release, name, token, c.obj.channel)
	return tag.RowsAffected() == 1, err
}

// free releases the row now if the database answers, and otherwise in the
// background (see abandon).
func (c *Client) free(ctx context.Context, name, token string, ttl time.Duration) {
	if _, err := c.release(ctx, name, token); err != nil && !isServerError(err) {
		c.abandon(name, token, ttl)
	}
}

// abandon frees, in the background, the row of lock name that an
// interrupted statement may have left held by token, looking for it until
// the row is freed, until it has been found not held often enough and
// long enough that a statement still in flight would have landed (see
// background.Clean), or until the Client is closed.
func (c *Client) abandon(name, token string, ttl time.Duration) {
	c.bg.Clean(func(ctx context.Context) background.Outcome {
		freed, err := c.release(ctx, name, token)
		switch {
		case err == nil && freed:
			return background.Cleaned
		case err == nil || isServerError(err):
			return background.Nothing
		}
		return background.Unreachable
	})
}

// refresh extends the leases gs to their TTL from now, in one statement.
// held[i] reports whether gs[i] still holds its row.
func (c *Client) refresh(ctx context.Context, gs []*grant) (held []bool, err error) {
	names, tokens, ttls := make([]string, len(gs)), make([]string, len(gs)), make([]int64, len(gs))
	for i, g := range gs {
		names[i], tokens[i], ttls[i] = g.Key(), g.Token(), g.m.cfg.ttlMillis()
	}
	rows, err := c.pool.Query(ctx, c.sql.refresh, names, tokens, ttls)
	if err != nil {
		return nil, err
	}
	still := make(map[[2]string]bool, len(gs))
	var name, token string
	if _, err := pgx.ForEachRow(rows, []any{&name, &token}, func() error {
		still[[2]string{name, token}] = true
		return nil
	}); err != nil {
		return nil, err
	}
	held = make([]bool, len(gs))
	for i, g := range gs {
		held[i] = still[[2]string{g.Key(), g.Token()}]
	}
	return held, nil
}
