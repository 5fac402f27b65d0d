package redislock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// One name serves one kind of lock: whichever kind takes a name first, every
// other kind is refused with an error that names it, and nothing is left
// held by the refused attempt.
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
		"Latch": func(n string) (func(), error) {
			_, err := c.NewLatch(n).TrySetCount(ctx, 1)
			return func() { c.NewLatch(n).CountDown(ctx) }, err
		},
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
			if err == nil || !strings.Contains(err.Error(), "already used by a "+first) || errors.Is(err, dlock.ErrNotObtained) {
				t.Errorf("%s on a %s's name = %v; want an error naming the %s", second, first, err, first)
			}
			done()
		}
	}
	// The claim outlives the holds: the name stays the first kind's.
	if _, err := take["Semaphore"]("kinds-Mutex-FairMutex"); err == nil {
		t.Error("a released Mutex's name was taken by a Semaphore")
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
