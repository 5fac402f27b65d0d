package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/redislock"
)

// Two groups of clients lock overlapping sets in opposite orders: the
// canonical order prevents deadlock, and each set is held exclusively.
func TestIntegrationMultiLockNoDeadlock(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	other := standalone(t) // locks may live on different deployments
	ctx := timeout(t, 60*time.Second)
	var inside atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			c1, c2 := newClient(t, d, goRedis), newClient(t, other, goRedis)
			a, b := c1.NewMutex("multi-a"), c2.NewMutex("multi-b")
			ml := redislock.NewMultiLock(a, b)
			if i%2 == 1 {
				ml = redislock.NewMultiLock(b, a)
			}
			for range 5 {
				lease, err := ml.Lock(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				if n := inside.Add(1); n != 1 {
					t.Errorf("%d holders of the same set", n)
				}
				time.Sleep(time.Millisecond)
				inside.Add(-1)
				if err := lease.Release(ctx); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
}

// All or nothing: if one lock is held elsewhere, TryLock takes none.
func TestIntegrationMultiLockAllOrNothing(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, 10*time.Second)
	c := newClient(t, d, goRedis)
	held, err := newClient(t, d, goRedis).NewMutex("aon-c").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ml := redislock.NewMultiLock(c.NewMutex("aon-a"), c.NewMutex("aon-b"), c.NewMutex("aon-c"))
	if _, err := ml.TryLock(ctx); !errors.Is(err, dlock.ErrNotObtained) || !strings.Contains(err.Error(), "aon-c") {
		t.Fatalf("TryLock with one lock taken = %v; want ErrNotObtained naming it", err)
	}
	for _, name := range []string{"aon-a", "aon-b"} {
		if out, _ := d.servers[0].Do("EXISTS", lockKey(name)); out != "0" {
			t.Errorf("%s left held after a failed MultiLock", name)
		}
	}
	held.Release(ctx)
	lease, err := ml.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if lease.Key() != "aon-a+aon-b+aon-c" {
		t.Errorf("Key = %q", lease.Key())
	}
	// Losing one lock ends the whole lease.
	d.servers[0].Do("DEL", lockKey("aon-b"))
	if err := lease.Refresh(ctx); err == nil {
		t.Error("Refresh with one lock deleted succeeded")
	}
	select {
	case <-lease.Done():
		if !errors.Is(lease.Err(), dlock.ErrLost) {
			t.Errorf("Err = %v; want ErrLost", lease.Err())
		}
	case <-time.After(time.Second):
		t.Fatal("Done not closed after one lock was lost")
	}
	lease.Release(ctx)
	if _, err := redislock.NewMultiLock().Lock(ctx); err == nil {
		t.Error("an empty MultiLock locked")
	}
	m := c.NewMutex("twice")
	if _, err := redislock.NewMultiLock(m, m).Lock(ctx); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("a lock given twice = %v; want an error", err)
	}
}

// The seed's inventory split into segments: items map to a stable stripe.
func TestIntegrationStriped(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, 10*time.Second)
	c := newClient(t, d, goRedis)
	s := c.NewStriped("inventory", 8)
	s2 := newClient(t, d, goRedis).NewStriped("inventory", 8)
	seen := map[int]bool{}
	for i := range 200 {
		id := fmt.Sprintf("sku-%d", i)
		if s.Stripe(id) != s2.Stripe(id) {
			t.Fatalf("%s maps to %d and %d in two clients", id, s.Stripe(id), s2.Stripe(id))
		}
		seen[s.Stripe(id)] = true
	}
	if len(seen) != 8 {
		t.Errorf("200 ids used %d of 8 stripes", len(seen))
	}
	lease, err := s.For("sku-1").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s2.For("sku-1").TryLock(ctx); !errors.Is(err, dlock.ErrNotObtained) {
		t.Errorf("same item from another client = %v; want ErrNotObtained", err)
	}
	lease.Release(ctx)
	if _, err := c.NewStriped("bad", 0).For("x").Lock(ctx); err == nil || !strings.Contains(err.Error(), "at least one stripe") {
		t.Errorf("zero stripes = %v; want an error", err)
	}
}

func TestIntegrationInspectAndForceUnlock(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, 10*time.Second)
	c := newClient(t, d, goRedis)
	if info, err := c.Inspect(ctx, "inspected"); err != nil || info.Kind != dlock.KindFree {
		t.Fatalf("Inspect of a free lock = %+v, %v", info, err)
	}
	rm := c.NewReentrantMutex("inspected", redislock.WithTTL(10*time.Second))
	lease, err := rm.Lock(dlock.WithOwner(ctx, "ops"))
	if err != nil {
		t.Fatal(err)
	}
	inner, _ := rm.Lock(lease.Context())
	info, err := c.Inspect(ctx, "inspected")
	if err != nil {
		t.Fatal(err)
	}
	if info.Kind != dlock.KindReentrantMutex || len(info.Holders) != 1 || info.Holders[0] != (dlock.Holder{Owner: sha1hex("ops"), Mode: dlock.ModeExclusive, Holds: 2}) ||
		info.Fence != lease.Fence() || info.TTL <= 0 || info.TTL > 10*time.Second {
		t.Fatalf("Inspect = %+v; want reentrant, sha1(ops) x2, fence %d, a TTL", info, lease.Fence())
	}
	waiter := make(chan error, 1)
	go func() {
		l, err := newClient(t, d, goRedis).NewReentrantMutex("inspected",
			redislock.WithRetry(dlock.LinearBackoff(5*time.Second, 5*time.Second))).Lock(ctx)
		if err == nil {
			l.Release(ctx)
		}
		waiter <- err
	}()
	time.Sleep(200 * time.Millisecond)
	if held, err := c.ForceUnlock(ctx, "inspected"); err != nil || !held {
		t.Fatalf("ForceUnlock = %v, %v", held, err)
	}
	select {
	case err := <-waiter:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Second):
		t.Fatal("ForceUnlock did not wake the waiter")
	}
	for _, l := range []dlock.Lease{lease, inner} {
		if err := l.Refresh(ctx); !errors.Is(err, dlock.ErrNotHeld) {
			t.Errorf("Refresh after ForceUnlock = %v; want ErrNotHeld", err)
		}
	}
	if _, err := c.Inspect(ctx, ""); err == nil {
		t.Error("Inspect of an empty name succeeded")
	}
}

// A member taken first and lost while Lock waits for a later one (its
// server paused past the TTL, and another client took it) does not come
// back as part of a valid lease: Lock starts again, and returns only with
// every member held.
func TestIntegrationMultiLockMemberLostWhileWaiting(t *testing.T) {
	t.Parallel()
	da, db := standalone(t), standalone(t)
	ctx := timeout(t, 30*time.Second)
	ttl := 600 * time.Millisecond
	x, err := newClient(t, db, goRedis).NewMutex("lost-b").Lock(ctx) // "b" is busy
	if err != nil {
		t.Fatal(err)
	}
	ml := redislock.NewMultiLock(newClient(t, da, goRedis).NewMutex("lost-a", redislock.WithTTL(ttl)),
		newClient(t, db, goRedis).NewMutex("lost-b", redislock.WithTTL(ttl)))
	type result struct {
		lease dlock.Lease
		err   error
		at    time.Time
	}
	got := make(chan result, 1)
	go func() {
		l, err := ml.Lock(ctx)
		got <- result{l, err, time.Now()}
	}()
	time.Sleep(200 * time.Millisecond) // ml holds "a" and waits for "b"
	if err := da.servers[0].Pause(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * ttl)
	if err := da.servers[0].Resume(); err != nil {
		t.Fatal(err)
	}
	var y dlock.Lease
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if y, err = newClient(t, da, goRedis).NewMutex("lost-a").TryLock(ctx); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("another client could not take the expired \"a\": %v", err)
		}
	}
	x.Release(ctx) // "b" is free: ml gets it
	time.Sleep(300 * time.Millisecond)
	select {
	case r := <-got:
		if r.err == nil {
			t.Errorf("Lock returned while another client held \"a\": Err %v, Until %v from now", r.lease.Err(), time.Until(r.lease.Until()))
			r.lease.Release(ctx)
		} else {
			t.Errorf("Lock: %v", r.err)
		}
		y.Release(ctx)
		return
	default:
	}
	released := time.Now()
	y.Release(ctx)
	r := <-got
	if r.err != nil {
		t.Fatalf("Lock: %v", r.err)
	}
	defer r.lease.Release(ctx)
	if r.at.Before(released) || r.lease.Err() != nil || !time.Now().Before(r.lease.Until()) {
		t.Errorf("Lock returned %v after \"a\" was free, with Err %v and Until %v from now", r.at.Sub(released), r.lease.Err(), time.Until(r.lease.Until()))
	}
}

// Inspect counts the clients waiting for a Mutex, and ForceUnlock wakes
// the first of them at once: it does not wait for its next poll.
func TestIntegrationForceUnlockWakesMutexWaiter(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, 30*time.Second)
	op := newClient(t, d, goRedis)
	held, err := op.NewMutex("forced-mutex", redislock.WithTTL(20*time.Second)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)
	got := make(chan time.Time, 2)
	wctx, stop := context.WithCancel(ctx)
	var waiters sync.WaitGroup
	defer waiters.Wait()
	defer stop() // the second waiter is still waiting when the test ends
	for range 2 {
		c := newClient(t, d, goRedis)
		waiters.Go(func() {
			// Polls 10s apart: only a notice gets it in sooner.
			l, err := c.NewMutex("forced-mutex", redislock.WithTTL(20*time.Second),
				redislock.WithRetry(dlock.LinearBackoff(10*time.Second, 10*time.Second))).Lock(wctx)
			if err != nil {
				if wctx.Err() == nil {
					t.Errorf("waiter: %v", err)
				}
				got <- time.Time{}
				return
			}
			got <- time.Now()
			l.Release(context.WithoutCancel(ctx))
		})
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		info, err := op.Inspect(ctx, "forced-mutex")
		if err != nil {
			t.Fatal(err)
		}
		if info.Waiters == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Inspect with two clients waiting: %+v; want Waiters 2", info)
		}
		time.Sleep(20 * time.Millisecond)
	}
	forced := time.Now()
	if ok, err := op.ForceUnlock(ctx, "forced-mutex"); !ok || err != nil {
		t.Fatalf("ForceUnlock = %v, %v", ok, err)
	}
	if at := <-got; at.IsZero() || at.Sub(forced) > 2*time.Second {
		t.Errorf("the first waiter was granted %v after ForceUnlock; want it woken at once", at.Sub(forced))
	}
}
