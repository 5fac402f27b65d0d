package zklock_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/zklock"
)

// Never more than n holders, in FIFO order of asking, each with its own
// fence; a dead client's leases come back when its session ends.
func TestIntegrationSemaphore(t *testing.T) {
	path := uniquePath(t)
	ctx := ctxFor(t, time.Minute)
	const permits = 3
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	var fences sync.Map
	for i := range 8 {
		sem := connect(t, []string{sharedZK(t).Addr()}).NewSemaphore(path, permits)
		wg.Go(func() {
			for range 5 {
				lease, err := sem.Lock(ctx)
				if err != nil {
					t.Errorf("client %d: %v", i, err)
					return
				}
				if _, dup := fences.LoadOrStore(lease.Fence(), true); dup {
					t.Errorf("fence %d granted twice", lease.Fence())
				}
				n := inside.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(3 * time.Millisecond)
				inside.Add(-1)
				lease.Release(ctx)
			}
		})
	}
	wg.Wait()
	// How many held at once depends on the machine: loaded (a fresh
	// clone's make test), grants 3ms long came one at a time. That permits
	// holders fit at once is checked below, where one client takes them all.
	t.Logf("measured: at most %d holders at once", most.Load())
	if m := most.Load(); m > permits {
		t.Errorf("at most %d holders at once; want %d at most", m, permits)
	}

	// A client that dies holding leases: they come back with its session.
	dead := connect(t, []string{sharedZK(t).Addr()})
	for range permits {
		if _, err := dead.NewSemaphore(path, permits).Lock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	sem := connect(t, []string{sharedZK(t).Addr()}).NewSemaphore(path, permits)
	if _, err := sem.TryLock(ctx); !errors.Is(err, dlock.ErrNotObtained) {
		t.Fatalf("TryLock on a full semaphore = %v", err)
	}
	dead.Conn().Close() // the session ends without releasing anything
	lease, err := sem.Lock(ctxFor(t, 10*time.Second))
	if err != nil {
		t.Fatalf("Lock after the holder's session closed: %v", err)
	}
	lease.Release(ctx)
}

// A release that lands between a semaphore waiter's listing and its next
// request still wakes it: the listing itself sets the watch.
func TestIntegrationSemaphoreWakeBetweenRequests(t *testing.T) {
	proxy := testenv.StartProxy(t, sharedZK(t).Addr())
	ctx := ctxFor(t, time.Minute)
	path := uniquePath(t)
	adm := admin(t, []string{sharedZK(t).Addr()})
	holder, err := connect(t, []string{sharedZK(t).Addr()}).NewSemaphore(path, 1).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sem := connect(t, []string{proxy.Addr()}, zklock.WithSessionTimeout(20*time.Second)).NewSemaphore(path, 1)
	const oneWay = 200 * time.Millisecond
	proxy.SetLatency(oneWay)
	got := make(chan error, 1)
	go func() {
		l, err := sem.Lock(ctx)
		if err == nil {
			l.Release(ctx)
		}
		got <- err
	}()
	waitChildren(t, adm, path, 2) // the create reached the server at about 1 one-way delay
	time.Sleep(5 * oneWay / 2)    // the listing is served at about 3, a next request at 5
	holder.Release(ctx)
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the waiter still waits 10s after the only holder released; children %v", children(t, adm, path))
	}
}

// The last Semaphore lease's Release takes Curator's leases directory with
// it, rather than leaving it to the ensemble's container reaper (a second
// in tests, a minute by default; the shared Kinds case found it left 5s
// after the release once).
func TestIntegrationSemaphoreReleaseTakesLeasesDir(t *testing.T) {
	t.Parallel()
	z := sharedZK(t)
	c := connect(t, []string{z.Addr()})
	ctx := ctxFor(t, 30*time.Second)
	path := uniquePath(t)
	for range 5 {
		l, err := c.NewSemaphore(path, 2).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if ok, _, err := c.Conn().Exists(path + "/leases"); ok || err != nil {
			t.Fatalf("%s/leases right after the last lease's Release: exists %v, %v; want gone", path, ok, err)
		}
	}
}
