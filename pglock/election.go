package pglock

import (
	"context"
	"errors"
	"fmt"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/dblease"
	"github.com/dlock-go/dlock/internal/election"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// NewElection returns the election called name (see dlock.Election). Its
// leader holds the lease-mode Mutex called name, made with opts, and keeps
// its value in the leader column of the Mutex's row, valid while it holds
// the row; every change is notified on the Client's channel, and observers
// read the row again at least every min(TTL/4, 1s) in case a notice is
// missed. Leader names a leader cut off from the database until its row
// expires by the server's clock: at most the drift allowance (dlock.Drift)
// plus the latency of its last renewal after its Until. The column came
// after the table's first version: run Migrate (or
// SchemaSQL) again on a table made before it. NewElection never fails: a
// bad name or option is reported by every call.
func (c *Client) NewElection(name string, opts ...Option) dlock.Election {
	m := c.NewMutex(name, opts...)
	return election.New(election.Config{Name: name, Lock: m, Store: &electionStore{c: c, name: name},
		TTL: m.core.Cfg.TTL, Err: m.core.Err})
}

type electionStore struct {
	c    *Client
	name string
}

// describe explains err; a missing leader column asks for Migrate.
func (s *electionStore) describe(what string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == codeUndefinedColumn {
		return fmt.Errorf("pglock: %s %q: %w (table %s has no leader column yet: run Client.Migrate, or the SQL of SchemaSQL, again)",
			what, s.name, err, s.c.core.Cfg.Table)
	}
	return s.c.describe(what, s.name, err)
}

func (s *electionStore) Publish(ctx context.Context, l dlock.Lease, r election.Record) error {
	if err := s.c.usable(); err != nil {
		return err
	}
	var tag pgconn.CommandTag
	err := again(ctx, func() (err error) {
		tag, err = exec(ctx, s.c.pool, s.c.sql.electPublish, s.name, r.Token, r.String(), s.c.obj.channel)
		return err
	})
	if err != nil {
		return s.describe("publishing the leader of", err)
	}
	if tag.RowsAffected() != 1 {
		return election.ErrNotHolder
	}
	return nil
}

func (s *electionStore) Read(ctx context.Context) (election.Record, bool, error) {
	if err := s.c.usable(); err != nil {
		return election.Record{}, false, err
	}
	var token, rec string
	err := again(ctx, func() error { return queryRow(ctx, s.c.pool, []any{&token, &rec}, s.c.sql.electRead, s.name) })
	if errors.Is(err, pgx.ErrNoRows) {
		return election.Record{}, false, nil
	}
	if err != nil {
		return election.Record{}, false, s.describe("reading the leader of", err)
	}
	return dblease.Leader("pglock", s.name, token, rec)
}

func (s *electionStore) Withdraw(ctx context.Context, r election.Record) error {
	if err := s.c.usable(); err != nil {
		return err
	}
	return again(ctx, func() error {
		return queryRow(ctx, s.c.pool, []any{nil, nil}, s.c.sql.electWithdraw, s.name, r.String(), s.c.obj.channel)
	})
}

func (s *electionStore) Changes(ctx context.Context) (<-chan struct{}, func()) {
	if s.c.usable() != nil {
		return nil, func() {}
	}
	w := s.c.notices.wait(s.name)
	return w.C(), w.Close
}
