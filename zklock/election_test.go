package zklock_test

import (
	"context"
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/zklock"
)

func TestIntegrationElection(t *testing.T) {
	servers := []string{testenv.StartZooKeeper(t).Addr()}
	dlocktest.RunElection(t, dlocktest.ElectionBackend{
		NewElection: func(t testing.TB, name string, o dlocktest.Options) dlock.Election {
			opts := []zklock.Option{zklock.WithTTL(o.TTL)}
			if o.NoRenewal {
				opts = append(opts, zklock.WithoutRenewal())
			}
			return connect(t, servers).NewElection(lockPath(name), opts...)
		},
	})
}

// Inspect names the leader's owner token, not its record.
func TestIntegrationElectionInspect(t *testing.T) {
	servers := []string{testenv.StartZooKeeper(t).Addr()}
	ctx := context.Background()
	c := connect(t, servers)
	l, err := c.NewElection("/elections/inspect").Campaign(ctx, "leader-value")
	if err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	info, err := c.Inspect(ctx, "/elections/inspect")
	if err != nil || len(info.Holders) != 1 || info.Holders[0].Owner != l.Token() {
		t.Fatalf("Inspect = %+v, %v; want one holder with owner %q", info, err, l.Token())
	}
}
