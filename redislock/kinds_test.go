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

// One name serves one kind of lock at a time: while one kind holds a name,
// every other kind is refused with an error that names both kinds
// and matches dlock.ErrKindMismatch, and nothing is left held by the
// refused attempt. Once released, the name is free for any kind. A Latch
// is not a lock and claims no name.
func TestIntegrationOneKindPerName(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, 60*time.Second)
	c := newClient(t, d, goRedis)
	take := map[string]func(name string) (func(), error){
		"Mutex":          lockWith(ctx, func(n string) dlock.Locker { return c.NewMutex(n) }),
		"ReentrantMutex": lockWith(ctx, func(n string) dlock.Locker { return c.NewReentrantMutex(n) }),
		"FairMutex":      lockWith(ctx, func(n string) dlock.Locker { return c.NewFairMutex(n) }),
		"RWMutex":        lockWith(ctx, func(n string) dlock.Locker { return c.NewRWMutex(n).Writer() }),
		"Semaphore":      lockWith(ctx, func(n string) dlock.Locker { return c.NewSemaphore(n, 2) }),
	}
	for first, takeFirst := range take {
		for second, takeSecond := range take {
			if first == second {
				continue
			}
			name := "kinds-" + first + "-" + second
			done, err := takeFirst(name)
			if err != nil {
				t.Fatalf("%s on a fresh name: %v", first, err)
			}
			_, err = takeSecond(name)
			if err == nil || !strings.Contains(err.Error(), "held by a "+first) || !strings.Contains(err.Error(), "a "+second+" cannot take") || !errors.Is(err, dlock.ErrKindMismatch) || !errors.Is(err, dlock.ErrNotObtained) {
				t.Errorf("%s on a %s's name = %v; want an error naming the %s and the %s", second, first, err, first, second)
			}
			done()
		}
	}
	// No claim outlives the holds: a released name is free for any kind,
	// and a latch of the same name is another thing.
	for second, takeSecond := range take {
		done, err := takeSecond("kinds-Mutex-FairMutex")
		if err != nil {
			t.Errorf("%s on a released Mutex's name: %v", second, err)
		}
		done()
	}
	if _, err := c.NewLatch("kinds-Mutex").TrySetCount(ctx, 1); err != nil {
		t.Errorf("a latch named as a Mutex: %v", err)
	}
}

func lockWith(ctx context.Context, make func(string) dlock.Locker) func(string) (func(), error) {
	return func(name string) (func(), error) {
		l, err := make(name).TryLock(ctx)
		if err != nil {
			return func() {}, err
		}
		return func() { l.Release(ctx) }, nil
	}
}

// A Lock does not wait for another kind of lock (dlock.ErrKindMismatch):
// one that finds the name held by another kind returns at once, and so
// does one already waiting for its own kind that finds, at its next
// attempt, that another kind took the name meanwhile (Redis keeps no
// queue across kinds: here the holder's key is deleted behind its back
// and a Semaphore takes the name). The waiter leaves the FairMutex's
// queue, and nothing is left once the Semaphore releases.
func TestIntegrationLockRefusedForAnotherKind(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, 30*time.Second)
	c := newClient(t, d, goRedis)
	const name = "kinds-refused"
	held, err := c.NewFairMutex(name).TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := c.NewSemaphore(name, 2).Lock(ctx); !errors.Is(err, dlock.ErrKindMismatch) || !errors.Is(err, dlock.ErrNotObtained) || time.Since(start) > 5*time.Second {
		t.Fatalf("a Semaphore's Lock while a FairMutex holds = %v after %v; want ErrKindMismatch and ErrNotObtained at once", err, time.Since(start))
	}
	got := make(chan error, 1)
	// The waiter's next attempt comes 5s after the last (and on no
	// wake-up, as the key is deleted behind its back), so the Semaphore
	// takes the name first however slow the machine is.
	go func() {
		l, err := newClient(t, d, goRedis).NewFairMutex(name, redislock.WithRetry(dlock.LinearBackoff(5*time.Second, 5*time.Second))).Lock(ctx)
		if err == nil {
			l.Release(ctx)
		}
		got <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if n, _ := d.admin(t).LLen(ctx, lockKey(name)+":queue").Result(); n == 1 {
			break
		} else if time.Now().After(deadline) {
			t.Fatal("the second FairMutex did not join the queue")
		}
	}
	if err := d.admin(t).Del(ctx, lockKey(name)).Err(); err != nil {
		t.Fatal(err)
	}
	permit, err := c.NewSemaphore(name, 2).TryLock(ctx)
	if err != nil {
		t.Fatalf("a Semaphore on the name freed behind the FairMutex's back: %v", err)
	}
	select {
	case err := <-got:
		if !errors.Is(err, dlock.ErrKindMismatch) || !errors.Is(err, dlock.ErrNotObtained) {
			t.Errorf("the waiting FairMutex's Lock = %v; want ErrKindMismatch and ErrNotObtained", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting FairMutex still waits 10s after a Semaphore took the name")
	}
	if n, err := d.admin(t).Exists(ctx, lockKey(name)+":queue", lockKey(name)+":timeouts").Result(); err != nil || n != 0 {
		t.Errorf("the FairMutex's queue keys: %d exist (%v); want none once its waiter gave up", n, err)
	}
	permit.Release(ctx)
	held.Release(ctx)
	if left := leftovers(t, d, name); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

// A lock asked under the Context of a lease of another kind on the same
// name, from the same Client, is refused as another kind held by anyone
// is: with an error matching dlock.ErrKindMismatch and
// dlock.ErrNotObtained, at once. Only a lock of the lease's own kind is
// not reentrant (ErrNotReentrant), and an RWMutex's side its other side's
// (ErrUpgrade, ErrNotReentrant). Before, a Mutex or a FairMutex asked under
// any lease of the name got ErrNotReentrant ("ctx already holds it").
func TestIntegrationAnotherKindUnderAHoldersContext(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, 60*time.Second)
	c := newClient(t, d, goRedis)
	const name = "kinds-under-context"
	kinds := []struct {
		name string
		make func() dlock.Locker
	}{
		{"Mutex", func() dlock.Locker { return c.NewMutex(name) }},
		{"ReentrantMutex", func() dlock.Locker { return c.NewReentrantMutex(name) }},
		{"FairMutex", func() dlock.Locker { return c.NewFairMutex(name) }},
		{"RWMutex.read", func() dlock.Locker { return c.NewRWMutex(name).Reader() }},
		{"RWMutex.write", func() dlock.Locker { return c.NewRWMutex(name).Writer() }},
		{"Semaphore", func() dlock.Locker { return c.NewSemaphore(name, 2) }},
	}
	for _, a := range kinds {
		held, err := a.make().Lock(ctx)
		if err != nil {
			t.Fatalf("%s: %v", a.name, err)
		}
		for _, b := range kinds {
			if b.name == a.name || strings.HasPrefix(a.name, "RWMutex") && strings.HasPrefix(b.name, "RWMutex") {
				continue
			}
			for _, try := range []bool{true, false} {
				lctx, cancel := context.WithTimeout(held.Context(), 10*time.Second)
				start := time.Now()
				var l dlock.Lease
				if try {
					l, err = b.make().TryLock(lctx)
				} else {
					l, err = b.make().Lock(lctx)
				}
				cancel()
				if l != nil {
					l.Release(ctx)
				}
				if !errors.Is(err, dlock.ErrKindMismatch) || !errors.Is(err, dlock.ErrNotObtained) || time.Since(start) > 5*time.Second {
					t.Errorf("%s of a %s under a %s lease's Context = %v after %v; want ErrKindMismatch and ErrNotObtained at once",
						map[bool]string{true: "TryLock", false: "Lock"}[try], b.name, a.name, err, time.Since(start))
				}
			}
		}
		if err := held.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if left := leftovers(t, d, name); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

// An RWMutex's or a Semaphore's holds live under the name's main key, the
// marker that tells other kinds the name is taken. When that key goes
// behind their back (an operator's DEL, an eviction), the holds are lost,
// as a Mutex's lease is when its key goes: the next renewal finds the
// marker gone and ends the lease with dlock.ErrTakenOver, whether another
// kind took the name meanwhile (its lease is kept: the renewal no longer
// writes the marker over it) or the same lock marked it again (an
// acquisition that finds no marker drops the holds left without one).
// Before, the reader, writer and permit kept holding beside the Mutex that
// took the name, for ever, and a renewal wrote the marker over a Mutex
// whose TTL was shorter than theirs, ending the Mutex's lease instead.
func TestIntegrationMarkerLossEndsTheHold(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, 60*time.Second)
	const ttl = time.Second
	hold := map[string]func(c *redislock.Client, name string) (dlock.Lease, error){
		"RWMutex.read": func(c *redislock.Client, name string) (dlock.Lease, error) {
			return c.NewRWMutex(name, redislock.WithTTL(ttl)).Reader().Lock(ctx)
		},
		"RWMutex.write": func(c *redislock.Client, name string) (dlock.Lease, error) {
			return c.NewRWMutex(name, redislock.WithTTL(ttl)).Writer().Lock(ctx)
		},
		"Semaphore": func(c *redislock.Client, name string) (dlock.Lease, error) {
			return c.NewSemaphore(name, 2, redislock.WithTTL(ttl)).Lock(ctx)
		},
	}
	lost := func(l dlock.Lease, what string) {
		t.Helper()
		select {
		case <-l.Done():
			if !errors.Is(l.Err(), dlock.ErrTakenOver) {
				t.Errorf("%s ended with %v; want ErrTakenOver", what, l.Err())
			}
		case <-time.After(3 * ttl):
			t.Errorf("%s still holds %v after the name's key went", what, 3*ttl)
		}
	}
	for kind, take := range hold {
		for _, mutexTTL := range []time.Duration{5 * time.Second, ttl / 2} {
			name := fmt.Sprintf("marker-%s-%v", kind, mutexTTL)
			c := newClient(t, d, goRedis)
			l, err := take(c, name)
			if err != nil {
				t.Fatalf("%s: %v", kind, err)
			}
			if err := d.admin(t).Del(ctx, lockKey(name)).Err(); err != nil {
				t.Fatal(err)
			}
			m, err := c.NewMutex(name, redislock.WithTTL(mutexTTL)).Lock(ctx)
			if err != nil {
				t.Fatalf("a Mutex on the name whose key went: %v", err)
			}
			lost(l, fmt.Sprintf("the %s, with a Mutex (TTL %v) on the name", kind, mutexTTL))
			if mutexTTL < ttl {
				time.Sleep(mutexTTL) // the Mutex's renewals would find its key written over
			}
			if m.Err() != nil {
				t.Errorf("the Mutex (TTL %v) that took the name from the %s's lost key: %v", mutexTTL, kind, m.Err())
			}
			m.Release(ctx)
		}
		// The same lock marks the name again.
		name := "marker-again-" + kind
		first, err := take(newClient(t, d, goRedis), name)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.admin(t).Del(ctx, lockKey(name)).Err(); err != nil {
			t.Fatal(err)
		}
		c := newClient(t, d, goRedis)
		m, err := c.NewMutex(name).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m.Release(ctx)
		var again dlock.Lease
		if kind == "Semaphore" {
			again, err = c.NewSemaphore(name, 2, redislock.WithTTL(ttl)).Lock(ctx)
		} else {
			again, err = c.NewRWMutex(name, redislock.WithTTL(ttl)).Reader().Lock(ctx)
		}
		if err != nil {
			t.Fatalf("the name, marked again: %v", err)
		}
		lost(first, fmt.Sprintf("the %s, with a Mutex come and gone and its own kind back", kind))
		if again.Err() != nil {
			t.Errorf("the lease that marked the name again: %v", again.Err())
		}
		again.Release(ctx)
	}
}
