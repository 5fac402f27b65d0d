package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/redislock"
)

// lockKeys counts the keys dlock wrote, apart from the fence counters (at
// most one per Cluster slot, kept for ever), and returns a few of them.
func lockKeys(t testing.TB, d *deployment) (n int, some []string, counters int) {
	t.Helper()
	ctx := context.Background()
	keys, err := d.admin(t).Keys(ctx, "dlock:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if strings.HasPrefix(k, "dlock:fence:{") {
			counters++
			continue
		}
		n++
		if len(some) < 5 {
			some = append(some, k)
		}
	}
	return n, some, counters
}

// Every key a lock writes goes away once its holders and waiters are gone:
// at once on release, and within the documented horizons otherwise (a
// holder that vanished: its TTL; a fair queue: its waiter timeout; a
// waiting writer's intent: min(TTL, 2s); a request's record: its
// memory). Only the fence counters stay, at most one per Cluster slot,
// however many names were used. Not in parallel: it shortens the request
// memory of the whole package.
func TestIntegrationNoKeysLeftBehind(t *testing.T) {
	defer redislock.SetRequestMemory(time.Second)()
	d := standalone(t)
	ctx := timeout(t, time.Minute)
	c := newClient(t, d, goRedis)
	ttl := 500 * time.Millisecond
	base, _, _ := lockKeys(t, d)
	const names = 100
	// A holder that vanishes (i%10 == 5) is never released nor renewed.
	opts := func(i int) []redislock.Option {
		if i%10 == 5 {
			return []redislock.Option{redislock.WithTTL(ttl), redislock.WithoutRenewal()}
		}
		return []redislock.Option{redislock.WithTTL(ttl)}
	}
	kinds := map[string]func(name string, i int) dlock.Locker{
		"Mutex":          func(n string, i int) dlock.Locker { return c.NewMutex(n, opts(i)...) },
		"ReentrantMutex": func(n string, i int) dlock.Locker { return c.NewReentrantMutex(n, opts(i)...) },
		"FairMutex":      func(n string, i int) dlock.Locker { return c.NewFairMutex(n, opts(i)...) },
		"RWMutex.read":   func(n string, i int) dlock.Locker { return c.NewRWMutex(n, opts(i)...).Reader() },
		"RWMutex.write":  func(n string, i int) dlock.Locker { return c.NewRWMutex(n, opts(i)...).Writer() },
		"Semaphore":      func(n string, i int) dlock.Locker { return c.NewSemaphore(n, 2, opts(i)...) },
	}
	for kind, newLock := range kinds {
		for i := range names {
			name := fmt.Sprintf("residue-%s-%d", kind, i)
			l, err := newLock(name, i).TryLock(ctx)
			if err != nil {
				t.Fatalf("%s %s: %v", kind, name, err)
			}
			if i%10 == 0 { // contended: a waiter that gives up
				wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
				other := newLock(name, 0)
				if kind == "RWMutex.read" {
					other = c.NewRWMutex(name, redislock.WithTTL(ttl)).Writer()
				}
				var second dlock.Lease
				if kind == "Semaphore" { // the second permit
					if second, err = other.TryLock(ctx); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := other.Lock(wctx); !errors.Is(err, dlock.ErrNotObtained) {
					t.Errorf("%s %s: a waiter got %v; want ErrNotObtained", kind, name, err)
				}
				cancel()
				if second != nil {
					second.Release(ctx)
				}
			}
			if i%10 == 5 { // a holder that vanished: its lease is never released
				continue
			}
			if err := l.Release(ctx); err != nil {
				t.Fatalf("%s %s: Release: %v", kind, name, err)
			}
		}
	}
	latch := c.NewLatch("residue-latch")
	if _, err := latch.TrySetCount(ctx, 2); err != nil {
		t.Fatal(err)
	}
	latch.CountDown(ctx)
	latch.CountDown(ctx)
	sem := c.NewSemaphore("residue-limit", 1, redislock.WithTTL(ttl))
	if err := sem.SetPermits(ctx, 3); err != nil {
		t.Fatal(err)
	}
	n, _, _ := lockKeys(t, d)
	t.Logf("%d keys before the horizon", n-base)
	// The longest horizon here: a fair queue's waiter timeout.
	horizon := redislock.MinFairWaiterTimeout + time.Second
	var some []string
	var counters int
	for deadline := time.Now().Add(horizon); ; time.Sleep(100 * time.Millisecond) {
		if n, some, counters = lockKeys(t, d); n <= base {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d keys left %v after the horizon, such as %v", n-base, horizon, some)
		}
	}
	if used := len(kinds)*names + 2; counters > used {
		t.Errorf("%d fence counters for %d names", counters, used)
	}
	t.Logf("%d fence counters for %d names", counters, len(kinds)*names+2)
}
