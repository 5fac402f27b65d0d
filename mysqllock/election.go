package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/dblease"
	"github.com/dlock-go/dlock/internal/election"
	"github.com/go-sql-driver/mysql"
)

// NewElection returns the election called name (see dlock.Election). Its
// leader holds the lease-mode Mutex called name, made with opts, and keeps
// its value in a row of the table named after the Client's with
// "_leaders" appended (dlock_leases_leaders by default), valid while it
// holds the Mutex's row; the first election call that finds that table
// missing creates it (the role then needs CREATE on it). MySQL has no
// notifications: observers read the row every min(TTL/4, 1s), and a
// campaign waits as Lock does, polling. Leader names a leader cut off from
// the database until its row expires by the server's clock: at most the
// drift allowance (dlock.Drift) plus the latency of its last renewal after
// its Until. NewElection never fails: a bad name or option is reported by
// every call.
func (c *Client) NewElection(name string, opts ...Option) dlock.Election {
	m := c.NewMutex(name, opts...)
	s := &electionStore{c: c, name: name}
	err := m.core.Err
	if err == nil {
		err = c.usable()
	}
	if err == nil {
		var leaders string
		if leaders, err = quoteTable(c.core.Cfg.Table + "_leaders"); err == nil {
			load := dblease.SQLFiles("mysqllock", sqlFiles, strings.NewReplacer("{{table}}", tableOf(c), "{{leaders}}", leaders, "{{now}}", nowMicros))
			s.schema, s.publish, s.read, s.withdraw = load("elect_schema"), load("elect_publish"), load("elect_read"), load("elect_withdraw")
		} else {
			err = fmt.Errorf("mysqllock: election %q: the leaders' table: %w", name, err)
		}
	}
	return election.New(election.Config{Name: name, Lock: m, Store: s, TTL: m.core.Cfg.TTL, Err: err})
}

// tableOf returns the Client's quoted table name.
func tableOf(c *Client) string {
	q, _ := quoteTable(c.core.Cfg.Table) // checked by New
	return q
}

type electionStore struct {
	c                               *Client
	name                            string
	schema, publish, read, withdraw string
	created                         atomic.Bool // the leaders' table was created, or found
}

// run runs f, creating the leaders' table first if f finds it missing.
func (s *electionStore) run(ctx context.Context, f func() error) error {
	err := f()
	var my *mysql.MySQLError
	if errors.As(err, &my) && my.Number == errNoSuchTable && !s.created.Load() {
		if cerr := s.c.with(ctx, func(q querier) error { _, err := q.ExecContext(ctx, s.schema); return err }); cerr != nil {
			return s.c.describe("creating the leaders' table of", s.name, cerr)
		}
		s.created.Store(true)
		err = f()
	}
	return err
}

func (s *electionStore) Publish(ctx context.Context, _ dlock.Lease, r election.Record) error {
	if err := s.c.usable(); err != nil {
		return err
	}
	var n int64
	err := s.run(ctx, func() error {
		return s.c.again(ctx, func(q querier) error {
			res, err := q.ExecContext(ctx, s.publish, r.String(), s.name, r.Token)
			if err == nil {
				n, err = res.RowsAffected()
			}
			return err
		})
	})
	if err != nil {
		return s.c.describe("publishing the leader of", s.name, err)
	}
	if n == 0 {
		return election.ErrNotHolder
	}
	return nil
}

func (s *electionStore) Read(ctx context.Context) (election.Record, bool, error) {
	if err := s.c.usable(); err != nil {
		return election.Record{}, false, err
	}
	var token, rec []byte
	err := s.run(ctx, func() error {
		return s.c.again(ctx, func(q querier) error { return q.QueryRowContext(ctx, s.read, s.name).Scan(&token, &rec) })
	})
	if errors.Is(err, sql.ErrNoRows) {
		return election.Record{}, false, nil
	}
	if err != nil {
		return election.Record{}, false, s.c.describe("reading the leader of", s.name, err)
	}
	return dblease.Leader("mysqllock", s.name, string(token), string(rec))
}

func (s *electionStore) Withdraw(ctx context.Context, r election.Record) error {
	if err := s.c.usable(); err != nil {
		return err
	}
	return s.c.again(ctx, func(q querier) error { _, err := q.ExecContext(ctx, s.withdraw, s.name, r.Token); return err })
}

// Changes has no notifications to offer: observers poll.
func (s *electionStore) Changes(context.Context) (<-chan struct{}, func()) { return nil, func() {} }
