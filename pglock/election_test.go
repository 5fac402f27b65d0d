package pglock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/pglock"
)

func TestIntegrationElection(t *testing.T) {
	pg := startDB(t)
	options := func(o dlocktest.Options) []pglock.Option {
		opts := []pglock.Option{pglock.WithTTL(o.TTL)}
		if o.NoRenewal {
			opts = append(opts, pglock.WithoutRenewal())
		}
		return opts
	}
	dlocktest.RunElection(t, dlocktest.ElectionBackend{
		NewElection: func(t testing.TB, name string, o dlocktest.Options) dlock.Election {
			return newClient(t, pg.URL()).NewElection(name, options(o)...)
		},
		CutOff: func(t testing.TB, name string, o dlocktest.Options) (dlock.Election, func()) {
			p := testenv.StartProxy(t, pg.Addr())
			e := newClient(t, via(pg, p.Addr(), unique("cut-off"))).NewElection(name, options(o)...)
			return e, func() { p.Blackhole(true); t.Cleanup(func() { p.Blackhole(false); p.Reset() }) }
		},
		// The lease row's expiry, by the server's clock (see NewElection).
		LeaderHorizon: dlock.Drift(dlocktest.ElectionTTL),
	})
}

// A table made before the leader column: the election says to migrate.
func TestIntegrationElectionNeedsMigrate(t *testing.T) {
	pg := startDB(t)
	admin(t, pg.URL(), "ALTER TABLE dlock_leases DROP COLUMN leader")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e := newClient(t, pg.URL()).NewElection("old-table")
	_, err := e.Campaign(ctx, "a")
	if err == nil || !strings.Contains(err.Error(), "Migrate") {
		t.Fatalf("Campaign on a table without the leader column: %v; want an error asking for Migrate", err)
	}
	if l, err := e.Leader(ctx); err == nil || !strings.Contains(err.Error(), "Migrate") {
		t.Fatalf("Leader = %+v, %v; want an error asking for Migrate", l, err)
	}
	migrate(t, pg.URL())
	if _, err := e.Campaign(ctx, "a"); err != nil {
		t.Fatalf("Campaign after Migrate: %v", err)
	}
}
