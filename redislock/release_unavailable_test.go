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
	"github.com/dlock-go/dlock/redislock/rueidisconn"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// releasers are the kinds of lock whose Release runs a script that
// changes the server's state.
var releasers = []struct {
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
	failures := []struct {
		name string
		fail func(p *testenv.Proxy)
	}{
		{"Silent", func(p *testenv.Proxy) { p.Blackhole(true) }},
		{"Reset", func(p *testenv.Proxy) { p.SetRefuse(true); p.Reset() }},
		// Nothing listens: the release cannot even connect.
		{"Refused", func(p *testenv.Proxy) { p.Close() }},
	}
	for _, m := range releasers {
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

// A Release whose script ran but whose reply was lost (its connection
// reset while the reply was on its way back) has released the lock; a
// transport that sent the script again on a new connection would have the
// copy find the lock gone and report the lease taken over. Release returns
// nil or an error matching dlock.ErrUnavailable, never one matching
// dlock.ErrNotHeld, for every kind of lock and both transports, with the
// transports' default retries. (With goredisconn's scripts allowed to be
// sent again, go-redis's default does so after the reset, and Release
// returned "lock not held: ... taken over".)
func TestIntegrationReleaseReplyLostIsNotNotHeld(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	direct := newClient(t, d, goRedis) // watches the lock, not through the proxy
	opens := []struct {
		name string
		open func(t *testing.T, addr string) redislock.Conn
	}{
		{"goredis", func(t *testing.T, addr string) redislock.Conn {
			rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
			t.Cleanup(func() { rdb.Close() })
			return goredisconn.New(rdb)
		}},
		{"rueidis", func(t *testing.T, addr string) redislock.Conn {
			rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true, ForceSingleClient: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(rc.Close)
			return rueidisconn.New(rc)
		}},
	}
	// Each way, below half of AttemptTimeout: the script runs well within
	// it, and the reset has this long to come before the reply.
	const way = 400 * time.Millisecond
	for _, o := range opens {
		for _, m := range releasers {
			t.Run(o.name+"/"+m.name, func(t *testing.T) {
				t.Parallel()
				name := "reply-lost-" + o.name + "-" + m.name
				p := testenv.StartProxy(t, d.addrs()[0])
				c := redislock.New(o.open(t, p.Addr()))
				t.Cleanup(func() { c.Close() })
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				// Loads the kind's scripts, so that the release is one call.
				warm, err := m.make(c, "warm-"+name).Lock(ctx)
				if err != nil {
					t.Fatalf("Lock: %v", err)
				}
				if err := warm.Release(ctx); err != nil {
					t.Fatalf("Release: %v", err)
				}
				lease, err := m.make(c, name).Lock(ctx)
				if err != nil {
					t.Fatalf("Lock: %v", err)
				}
				p.SetLatency(way)
				done := make(chan error, 1)
				start := time.Now()
				go func() { done <- lease.Release(ctx) }()
				for inspect(t, direct, name).Held() { // the script ran; its reply is on its way
					if time.Since(start) > 10*time.Second {
						t.Fatal("the release never ran")
					}
					time.Sleep(time.Millisecond)
				}
				ran := time.Since(start)
				p.SetLatency(0)
				p.Reset()
				err = <-done
				t.Logf("measured: the release ran after %v; Release returned after %v: %v",
					ran.Round(time.Millisecond), time.Since(start).Round(time.Millisecond), err)
				if errors.Is(err, dlock.ErrNotHeld) || err != nil && !errors.Is(err, dlock.ErrUnavailable) {
					t.Errorf("Release whose reply was lost = %v; want nil or an error matching dlock.ErrUnavailable, not ErrNotHeld", err)
				}
				if info := inspect(t, direct, name); info.Held() {
					t.Errorf("the lock is held after its Release: %+v", info)
				}
			})
		}
	}
}
