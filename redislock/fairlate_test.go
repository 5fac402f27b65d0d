package redislock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/redisconn"
	"github.com/dlock-go/dlock/redislock"
)

// landsLateConn holds back, once armed, the fair_acquire calls that join
// or renew a waiter's place: the call returns when its context ends, as
// one cut short on the wire does, and reaches the server delay later, as
// a request that a loaded server read after another connection's.
type landsLateConn struct {
	redislock.Conn
	armed, held *atomic.Bool
	delay       time.Duration
	landed      *sync.WaitGroup
}

func (c landsLateConn) Eval(ctx context.Context, calls []redisconn.Call, results []redisconn.Result) {
	join := len(calls) == 1 && calls[0].Script.Name == "fair_acquire" && len(calls[0].Args) > 3 && calls[0].Args[3] == "1"
	if !join || !c.armed.Load() {
		c.Conn.Eval(ctx, calls, results)
		return
	}
	c.landed.Add(1)
	go func() {
		defer c.landed.Done()
		time.Sleep(c.delay)
		c.Conn.Eval(context.Background(), calls, make([]redisconn.Result, 1))
	}()
	c.held.Store(true)
	<-ctx.Done()
	results[0].Err = ctx.Err()
}

// A fair waiter whose Lock ends while its call that renews its place is
// on the wire leaves no place behind, though the call reaches the server
// after the waiter's leave: the next owner is not kept waiting for the
// waiter timeout, and nothing is left. Before, the place came back and
// held the queue's head for the waiter timeout (make test beside another:
// ClosedWhileWaiting on a Cluster left the queue keys, 2 of 2 runs).
func TestIntegrationFairPlaceLandingLate(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	for _, how := range []string{"cancel", "Close"} {
		t.Run(how, func(t *testing.T) {
			ctx := timeout(t, time.Minute)
			name := "fair-late-" + how
			var armed, held atomic.Bool
			var landed sync.WaitGroup
			wc := redislock.New(landsLateConn{Conn: goRedis(t, d), armed: &armed, held: &held, delay: 150 * time.Millisecond, landed: &landed})
			t.Cleanup(func() { wc.Close() })
			other := newClient(t, d, goRedis)
			holder, err := other.NewFairMutex(name, redislock.WithTTL(30*time.Second)).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			armed.Store(true)
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := wc.NewFairMutex(name, redislock.WithTTL(30*time.Second)).Lock(wctx)
				done <- err
			}()
			for !held.Load() {
				time.Sleep(time.Millisecond)
			}
			if how == "cancel" {
				cancel()
			} else if err := wc.Close(); err != nil {
				t.Errorf("Close with a waiter's call on the wire: %v", err)
			}
			if err := <-done; !errors.Is(err, dlock.ErrNotObtained) {
				t.Fatalf("the waiter's Lock = %v; want ErrNotObtained", err)
			}
			landed.Wait()
			if err := holder.Release(ctx); err != nil {
				t.Fatal(err)
			}
			// The waiter timeout is the TTL, 30s: a place that came back
			// would keep TryLock out for that long.
			start := time.Now()
			for {
				l, err := other.NewFairMutex(name).TryLock(ctx)
				if err == nil {
					t.Logf("measured: TryLock granted %v after the release", time.Since(start).Round(time.Millisecond))
					l.Release(ctx)
					break
				}
				if !errors.Is(err, dlock.ErrNotObtained) || time.Since(start) > 5*time.Second {
					t.Fatalf("TryLock %v after the holder released, the waiter gone: %v", time.Since(start).Round(time.Millisecond), err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			if n, err := d.admin(t).Exists(ctx, lockKey(name)+":queue", lockKey(name)+":timeouts").Result(); err != nil || n > 0 {
				t.Errorf("queue keys left: exists=%d, err=%v", n, err)
			}
		})
	}
}
