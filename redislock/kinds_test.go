package redislock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// One name serves one kind of lock at a time: while one kind holds a name,
// every other kind is refused with an error that names both kinds
// and matches dlock.ErrKindMismatch, and nothing is left held by the
// refused attempt. Once released, the name is free for any kind. A Latch
// is not a lock and claims no name.
func TestIntegrationOneKindPerName(t *testing.T) {
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

// Lock waits while another kind holds the name, as it does for a holder of
// its own kind, and gets the name once it is free.
func TestIntegrationLockWaitsForAnotherKind(t *testing.T) {
	d := standalone(t)
	ctx := timeout(t, 30*time.Second)
	c := newClient(t, d, goRedis)
	held, err := c.NewMutex("kinds-wait").TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		l, err := c.NewFairMutex("kinds-wait").Lock(ctx)
		if err == nil {
			l.Release(ctx)
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("a FairMutex's Lock returned %v while a Mutex held the name; want it to wait", err)
	case <-time.After(300 * time.Millisecond):
	}
	held.Release(ctx)
	select {
	case err := <-got:
		if err != nil {
			t.Errorf("FairMutex Lock after the Mutex's release: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the FairMutex did not get the name after the Mutex released it")
	}
}
