package main

import (
	"context"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/exampletest"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/zklock"
)

// The ZooKeeper example runs against a real server named by DLOCK_ZK: it
// takes the lock, works and releases it; run while another client holds
// the lock, it says so and returns.
func TestIntegrationZklockExample(t *testing.T) {
	srv := testenv.StartZooKeeper(t)
	t.Setenv("DLOCK_ZK", srv.Addr())
	exampletest.WantLogged(t, exampletest.RunMain(t, main), "generating the report with fence ")

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	locks, err := zklock.New(ctx, []string{srv.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer locks.Close()
	held, err := locks.NewMutex("/dlock/nightly-report").TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock after the example returned: %v; want the lock released", err)
	}
	defer held.Release(ctx)
	exampletest.WantLogged(t, exampletest.RunMain(t, main), "another process holds /dlock/nightly-report")
}
