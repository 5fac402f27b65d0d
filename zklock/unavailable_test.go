package zklock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
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

// A Release with a context that never ends, on an ensemble that does not
// answer, returns within the lease's TryLock bound (its TTL, 2s to 5s),
// as on every backend (dlocktest's ReleaseUnavailable, which runs with a
// 3s session timeout), and ends the lease: it waited for go-zookeeper to
// give the connection up, two thirds of the session timeout (6.0s at 9s).
func TestIntegrationReleaseOnSilentEnsemble(t *testing.T) {
	z := sharedZK(t)
	p := testenv.StartProxy(t, z.Addr())
	ctx := ctxFor(t, time.Minute)
	c := connect(t, []string{p.Addr()}, zklock.WithSessionTimeout(9*time.Second))
	l, err := c.NewMutex(uniquePath(t), zklock.WithTTL(2*time.Second)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p.Blackhole(true)
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- l.Release(context.Background()) }()
	select {
	case err := <-done:
		took := time.Since(start)
		t.Logf("measured: Release on a silent ensemble returned after %v: %v", took.Round(time.Millisecond), err)
		if took > 2*time.Second+dlocktest.Slack {
			t.Errorf("Release on a silent ensemble took %v; want within 2s, the TryLock bound at TTL 2s", took)
		}
		if l.Err() == nil {
			t.Errorf("the lease is still open after Release returned %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("Release on a silent ensemble still running after %v", time.Since(start))
	}
}
