package redislock_test

import (
	"context"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/redislock"
)

// Every kind of lock's lease made WithoutRenewal ends by itself at Until:
// a backend that built its lease without arming its timer (lease.State's
// Start) would hand out a lease whose Done never closed.
func TestIntegrationEveryKindEndsAtUntilWithoutRenewal(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	ctx := timeout(t, 30*time.Second)
	const ttl = time.Second
	opts := []redislock.Option{redislock.WithTTL(ttl), redislock.WithoutRenewal()}
	c := newClient(t, d, goRedis)
	kinds := map[string]dlock.Locker{
		"Mutex":          c.NewMutex("kinds-expire-mutex", opts...),
		"ReentrantMutex": c.NewReentrantMutex("kinds-expire-reentrant", opts...),
		"FairMutex":      c.NewFairMutex("kinds-expire-fair", opts...),
		"RWMutex.read":   c.NewRWMutex("kinds-expire-rw-read", opts...).Reader(),
		"RWMutex.write":  c.NewRWMutex("kinds-expire-rw-write", opts...).Writer(),
		"Semaphore(2)":   c.NewSemaphore("kinds-expire-sem", 2, opts...),
	}
	for name, l := range kinds {
		lctx := ctx
		if name == "ReentrantMutex" {
			lctx = dlock.WithOwner(ctx, "owner")
		}
		lease, err := l.Lock(lctx)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dlocktest.WaitDoneByUntil(t, lease, ttl+10*time.Second, name+" made WithoutRenewal")
			lease.Release(context.WithoutCancel(ctx))
		})
	}
}
