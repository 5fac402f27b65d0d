package zklock_test

import (
	"context"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/zklock"
)

func TestIntegrationElection(t *testing.T) {
	servers := []string{sharedZK(t).Addr()}
	options := func(o dlocktest.Options) []zklock.Option {
		opts := []zklock.Option{zklock.WithTTL(o.TTL)}
		if o.NoRenewal {
			opts = append(opts, zklock.WithoutRenewal())
		}
		return opts
	}
	dlocktest.RunElection(t, dlocktest.ElectionBackend{
		NewElection: func(t testing.TB, name string, o dlocktest.Options) dlock.Election {
			return connect(t, servers).NewElection(lockPath(name), options(o)...)
		},
		CutOff: func(t testing.TB, name string, o dlocktest.Options) (dlock.Election, func()) {
			p := testenv.StartProxy(t, servers[0])
			e := connect(t, []string{p.Addr()}).NewElection(lockPath(name), options(o)...)
			return e, func() { p.Blackhole(true); t.Cleanup(func() { p.Blackhole(false); p.Reset() }) }
		},
		// The leader's node lasts until its session expires, T after the
		// ensemble last heard from it, at the session tracker's next tick
		// (200ms in testenv); its lease, min(TTL, T/3) (see NewElection).
		LeaderHorizon: testSessionTimeout - min(dlocktest.ElectionTTL, testSessionTimeout/3) + 200*time.Millisecond,
	})
}

// Inspect names the leader's owner token, not its record.
func TestIntegrationElectionInspect(t *testing.T) {
	servers := []string{sharedZK(t).Addr()}
	ctx := context.Background()
	c := connect(t, servers)
	path := uniquePath(t)
	l, err := c.NewElection(path).Campaign(ctx, "leader-value")
	if err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	info, err := c.Inspect(ctx, path)
	if err != nil || len(info.Holders) != 1 || info.Holders[0].Owner != l.Token() {
		t.Fatalf("Inspect = %+v, %v; want one holder with owner %q", info, err, l.Token())
	}
}
