package redislock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/redis/go-redis/v9"
)

// A Release that gets no answer from the server (silent, reset, or
// refusing connections) is no answer about the lock: it returns within
// AttemptTimeout an error matching dlock.ErrUnavailable, and never one
// matching dlock.ErrNotHeld, for every kind of lock; the lease ends. (It
// said only "did not reach the server", matching nothing a caller can
// test for, and dlocktest's ReleaseDuringRenewal took it for a failure on
// a loaded machine, where a release can take longer than AttemptTimeout.)
func TestIntegrationReleaseUnreachableIsUnavailable(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	makers := []struct {
		name string
		make func(c *redislock.Client, key string) dlock.Locker
	}{
		{"Mutex", func(c *redislock.Client, key string) dlock.Locker { return c.NewMutex(key) }},
		{"ReentrantMutex", func(c *redislock.Client, key string) dlock.Locker { return c.NewReentrantMutex(key) }},
		{"FairMutex", func(c *redislock.Client, key string) dlock.Locker { return c.NewFairMutex(key) }},
		{"RWMutex.read", func(c *redislock.Client, key string) dlock.Locker { return c.NewRWMutex(key).Reader() }},
		{"RWMutex.write", func(c *redislock.Client, key string) dlock.Locker { return c.NewRWMutex(key).Writer() }},
		{"Semaphore", func(c *redislock.Client, key string) dlock.Locker { return c.NewSemaphore(key, 2) }},
	}
	failures := []struct {
		name string
		fail func(p *testenv.Proxy)
	}{
		{"Silent", func(p *testenv.Proxy) { p.Blackhole(true) }},
		{"Reset", func(p *testenv.Proxy) { p.SetRefuse(true); p.Reset() }},
		// Nothing listens: the release cannot even connect.
		{"Refused", func(p *testenv.Proxy) { p.Close() }},
	}
	for _, m := range makers {
		for _, f := range failures {
			t.Run(m.name+"/"+f.name, func(t *testing.T) {
				t.Parallel() // each on its own proxy; most of the time is AttemptTimeout
				p := testenv.StartProxy(t, d.addrs()[0])
				rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true})
				t.Cleanup(func() { rdb.Close() })
				c := redislock.New(goredisconn.New(rdb))
				t.Cleanup(func() { c.Close() })
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				l := m.make(c, "release-unreachable-"+m.name+"-"+f.name)
				lease, err := l.Lock(ctx)
				if err != nil {
					t.Fatalf("Lock: %v", err)
				}
				f.fail(p)
				start := time.Now()
				err = lease.Release(ctx)
				took := time.Since(start)
				t.Logf("measured: Release after %v: %v", took.Round(time.Millisecond), err)
				if !errors.Is(err, dlock.ErrUnavailable) || errors.Is(err, dlock.ErrNotHeld) {
					t.Errorf("Release on an unreachable server = %v; want an error matching dlock.ErrUnavailable, not ErrNotHeld", err)
				}
				if bound := redislock.AttemptTimeout + 10*dlocktest.Slack; took > bound {
					t.Errorf("Release took %v; want within AttemptTimeout (%v)", took, redislock.AttemptTimeout)
				}
				select {
				case <-lease.Done():
				default:
					t.Errorf("the lease is still open after its Release (Err %v)", lease.Err())
				}
			})
		}
	}
}
