package redislock_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/redislock"
)

// hostileLabels look like parts of the protocol: the waiter's old mark
// ('*'), the token's separator, key and hash-tag characters, a kind
// marker, a label cut at MaxLabelBytes right after a '*', invalid UTF-8,
// control characters.
var hostileLabels = []string{
	"ends*", "*", "**", "a~b~", "~", "a:b", "{tag}", "}{", " with  spaces ", "=Mutex=",
	strings.Repeat("x", dlock.MaxLabelBytes-1) + "*" + strings.Repeat("y", 60),
	"\xff*", "\x01", "",
}

// A take takes a lock and returns what gives it back.
type take func(ctx context.Context) (dlock.Lease, func(context.Context) error, error)

func locker(l dlock.Locker) take {
	return func(ctx context.Context) (dlock.Lease, func(context.Context) error, error) {
		lease, err := l.Lock(ctx)
		if err != nil {
			return nil, nil, err
		}
		return lease, lease.Release, nil
	}
}

func campaign(e dlock.Election, value string) take {
	return func(ctx context.Context) (dlock.Lease, func(context.Context) error, error) {
		l, err := e.Campaign(ctx, value)
		return l, e.Resign, err
	}
}

// A held lock stands for the same thing whatever its holder's label: a
// release wakes the waiter at once (a holder labelled "…*" once looked
// already marked as awaited, so that its release woke no one and the lock
// sat free until the waiter's next poll), and Inspect reports the holder's
// token and label as they are. Every kind that stores a label, and an
// election, whose leader holds a Mutex; a ReentrantMutex stores none, and
// a Latch no holder.
func TestIntegrationHostileLabels(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	holders, waiters := newClient(t, d, goRedis), newClient(t, d, rueidisClient)
	opts := []redislock.Option{redislock.WithTTL(time.Minute),
		redislock.WithRetry(dlock.LinearBackoff(time.Minute, time.Minute))} // a poll would come too late
	kinds := []struct {
		name     string
		labelled bool // Inspect reports the holder's label
		counted  bool // Inspect counts the waiter
		holder   func(c *redislock.Client, name string) take
		waiter   func(c *redislock.Client, name string) take
	}{
		{"Mutex", true, true,
			func(c *redislock.Client, n string) take { return locker(c.NewMutex(n, opts...)) },
			func(c *redislock.Client, n string) take { return locker(c.NewMutex(n, opts...)) }},
		{"ReentrantMutex", false, true,
			func(c *redislock.Client, n string) take { return locker(c.NewReentrantMutex(n, opts...)) },
			func(c *redislock.Client, n string) take { return locker(c.NewReentrantMutex(n, opts...)) }},
		{"FairMutex", true, true,
			func(c *redislock.Client, n string) take { return locker(c.NewFairMutex(n, opts...)) },
			func(c *redislock.Client, n string) take { return locker(c.NewFairMutex(n, opts...)) }},
		{"RWMutex.write", true, true,
			func(c *redislock.Client, n string) take { return locker(c.NewRWMutex(n, opts...).Writer()) },
			func(c *redislock.Client, n string) take { return locker(c.NewRWMutex(n, opts...).Writer()) }},
		{"RWMutex.read", true, true,
			func(c *redislock.Client, n string) take { return locker(c.NewRWMutex(n, opts...).Reader()) },
			func(c *redislock.Client, n string) take { return locker(c.NewRWMutex(n, opts...).Writer()) }},
		{"Semaphore", true, false,
			func(c *redislock.Client, n string) take { return locker(c.NewSemaphore(n, 1, opts...)) },
			func(c *redislock.Client, n string) take { return locker(c.NewSemaphore(n, 1, opts...)) }},
		{"Election", true, true,
			func(c *redislock.Client, n string) take { return campaign(c.NewElection(n, opts...), "leader") },
			func(c *redislock.Client, n string) take { return campaign(c.NewElection(n, opts...), "next") }},
	}
	for _, kind := range kinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			var wg sync.WaitGroup
			for i, label := range hostileLabels {
				name := fmt.Sprintf("label-%s-%d", kind.name, i)
				wg.Go(func() {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					held, release, err := kind.holder(holders, name)(dlock.WithLabel(ctx, label))
					if err != nil {
						t.Errorf("label %q: %v", label, err)
						return
					}
					info, err := holders.Inspect(ctx, name)
					want, _ := dlock.LabelFrom(dlock.WithLabel(ctx, label))
					if err != nil || kind.labelled && (len(info.Holders) != 1 || info.Holders[0].Owner != held.Token() || info.Holders[0].Label != want) {
						t.Errorf("label %q: Inspect reports holders %+v (%v); want owner %q, label %q", label, info.Holders, err, held.Token(), want)
					}
					got := make(chan time.Time, 1)
					go func() {
						_, undo, err := kind.waiter(waiters, name)(ctx)
						if err != nil {
							if ctx.Err() == nil {
								t.Errorf("label %q: waiter: %v", label, err)
							}
							return
						}
						got <- time.Now()
						undo(context.WithoutCancel(ctx))
					}()
					for kind.counted && ctx.Err() == nil {
						if info, _ := holders.Inspect(ctx, name); info.Waiters > 0 {
							break
						}
						time.Sleep(10 * time.Millisecond)
					}
					time.Sleep(100 * time.Millisecond) // the waiter has tried again and sleeps
					released := time.Now()
					if err := release(ctx); err != nil {
						t.Errorf("label %q: release: %v", label, err)
						return
					}
					select {
					case at := <-got:
						t.Logf("label %q: the waiter had the lock %v after the release", label, at.Sub(released).Round(time.Millisecond))
					case <-time.After(5 * time.Second):
						t.Errorf("label %q: the waiter still waits 5s after the release (its poll is a minute away): the release did not wake it", label)
					}
				})
			}
			wg.Wait()
		})
	}
}
