package etcdlock_test

import (
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/internal/testenv"
)

func TestIntegrationElection(t *testing.T) {
	endpoints := []string{sharedEtcd(t).Addr()}
	options := func(o dlocktest.Options) []etcdlock.Option {
		opts := []etcdlock.Option{etcdlock.WithTTL(o.TTL)}
		if o.NoRenewal {
			opts = append(opts, etcdlock.WithoutRenewal())
		}
		return opts
	}
	dlocktest.RunElection(t, dlocktest.ElectionBackend{
		NewElection: func(t testing.TB, name string, o dlocktest.Options) dlock.Election {
			return connect(t, endpoints).NewElection(lockName(name), options(o)...)
		},
		CutOff: func(t testing.TB, name string, o dlocktest.Options) (dlock.Election, func()) {
			p := testenv.StartProxy(t, endpoints[0])
			e := connect(t, []string{p.Addr()}).NewElection(lockName(name), options(o)...)
			return e, func() { p.Blackhole(true); t.Cleanup(func() { p.Blackhole(false); p.Reset() }) }
		},
		// The etcd lease's TTL is the election's rounded up to whole
		// seconds (1s: none), and the server looks for expired leases
		// every 500ms (see NewElection).
		LeaderHorizon: dlock.Drift(dlocktest.ElectionTTL) + 500*time.Millisecond,
	})
}
