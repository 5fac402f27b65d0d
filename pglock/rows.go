package pglock

import (
	"context"
	"time"

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

// look frees the row of lock name if token holds it, and notifies
// waiters, after asking whether backend pid is alive: the check comes
// first, in a statement of its own, so that a backend found ended has
// committed whatever it ran before the release looks (see
// dblease.Client.Abandon).
func (c *Client) look(ctx context.Context, name, token string, pid int64) (freed, alive bool, err error) {
	b := &pgx.Batch{}
	b.Queue("SELECT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $1::int)", pid)
	b.Queue(c.sql.release, name, token, c.obj.channel)
	br := send(ctx, c.pool, b)
	err = br.QueryRow().Scan(&alive)
	var tag pgconn.CommandTag
	if err == nil {
		tag, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag.RowsAffected() == 1, alive, err
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
