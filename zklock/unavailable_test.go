package zklock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/zklock"
)

// A Refresh with a context that never ends, on an ensemble that does not
// answer, returns by the lease's Until with an error matching
// dlock.ErrUnavailable (or the lease's own, once it has ended): before
// issue 32 it waited for go-zookeeper to give the connection up, two
// thirds of the session timeout after it last heard from the server.
func TestIntegrationRefreshOnSilentEnsemble(t *testing.T) {
	z := sharedZK(t)
	p := testenv.StartProxy(t, z.Addr())
	ctx := ctxFor(t, time.Minute)
	c := connect(t, []string{p.Addr()}, zklock.WithSessionTimeout(9*time.Second))
	l, err := c.NewMutex(uniquePath(t), zklock.WithTTL(2*time.Second)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p.Blackhole(true)
	until := l.Until()
	done := make(chan error, 1)
	go func() { done <- l.Refresh(context.Background()) }()
	select {
	case err := <-done:
		late := time.Since(until)
		t.Logf("measured: Refresh returned %v after Until: %v", late.Round(time.Millisecond), err)
		if !errors.Is(err, dlock.ErrUnavailable) && !errors.Is(err, dlock.ErrLost) {
			t.Errorf("Refresh on a silent ensemble = %v; want ErrUnavailable or ErrLost", err)
		}
		if late > 500*time.Millisecond {
			t.Errorf("Refresh returned %v after the lease's Until", late)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("Refresh on a silent ensemble still running %v after the lease's Until", time.Since(until))
	}
}
