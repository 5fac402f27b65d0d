package mysqllock_test

import (
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/mysqllock"
)

func TestIntegrationElection(t *testing.T) {
	db := startDB(t)
	options := func(o dlocktest.Options) []mysqllock.Option {
		opts := []mysqllock.Option{mysqllock.WithTTL(o.TTL)}
		if o.NoRenewal {
			opts = append(opts, mysqllock.WithoutRenewal())
		}
		return opts
	}
	dlocktest.RunElection(t, dlocktest.ElectionBackend{
		NewElection: func(t testing.TB, name string, o dlocktest.Options) dlock.Election {
			return newClient(t, db.DSN()).NewElection(name, options(o)...)
		},
		CutOff: func(t testing.TB, name string, o dlocktest.Options) (dlock.Election, func()) {
			p := testenv.StartProxy(t, db.Addr())
			e := newClient(t, strings.Replace(db.DSN(), db.Addr(), p.Addr(), 1)).NewElection(name, options(o)...)
			return e, func() { p.Blackhole(true); t.Cleanup(func() { p.Blackhole(false); p.Reset() }) }
		},
		// The lease row's expiry, by the server's clock (see NewElection).
		LeaderHorizon: dlock.Drift(dlocktest.ElectionTTL),
		Handover:      64 * time.Millisecond, // a campaign polls, at most DefaultRetry's longest sleep apart
	})
}
