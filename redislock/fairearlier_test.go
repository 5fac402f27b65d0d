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

// heldBackConn holds back, once armed, the first call that match picks
// (by default a fair_acquire that joins or renews a waiter's place): the
// call returns when its context ends (the attempt's AttemptTimeout), as
// one whose reply was lost does, and reaches the server only when land is
// closed; onHold, if set, sees it first. The calls match picks after it
// go through; passed counts those answered.
type heldBackConn struct {
	redislock.Conn
	armed, held *atomic.Bool
	passed      *atomic.Int32
	land        chan struct{}
	landed      *sync.WaitGroup
	match       func(redisconn.Call) bool
	onHold      func(redisconn.Call)
}

// joinsFairLine reports whether c is a fair_acquire that joins or renews
// a waiter's place.
func joinsFairLine(c redisconn.Call) bool {
	return c.Script.Name == "fair_acquire" && len(c.Args) > 3 && c.Args[3] == "1"
}

func (c heldBackConn) Eval(ctx context.Context, calls []redisconn.Call, results []redisconn.Result) {
	match := c.match
	if match == nil {
		match = joinsFairLine
	}
	if len(calls) != 1 || !match(calls[0]) || !c.armed.Load() {
		c.Conn.Eval(ctx, calls, results)
		return
	}
	if c.held.Load() {
		c.Conn.Eval(ctx, calls, results)
		if results[0].Err == nil {
			c.passed.Add(1)
		}
		return
	}
	if c.onHold != nil {
		c.onHold(calls[0])
	}
	c.held.Store(true)
	c.landed.Add(1)
	go func() {
		defer c.landed.Done()
		<-c.land
		c.Conn.Eval(context.Background(), calls, make([]redisconn.Result, 1))
	}()
	<-ctx.Done()
	results[0].Err = ctx.Err()
}

// A fair waiter's call whose reply was lost, followed by calls that were
// answered, reaches the server after the waiter's Lock has returned: the
// place it writes, or the grant it takes and its clean-up gives back,
// does not hold the line for the waiter timeout (30s here). Three ways:
// the waiter's context ends while it waits behind a holder (the late call
// puts its place back at the tail); the holder releases before the late
// call lands on the free lock (it takes the lock, and the clean-up of the
// attempt gave it back and put the waiter back at the head of the line);
// the waiter is granted the lock by a later attempt (the late call puts
// its place back behind its own hold). Before, the Lock looked again only
// when its very last call got no answer, and the clean-up of an attempt
// put the waiter back in line however long ago its Lock had returned: the
// next TryLock was refused for the waiter timeout in each case.
func TestIntegrationFairEarlierCallLandingLate(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	for _, how := range []string{"cancelled", "lands-on-free-lock", "after-own-grant"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			ctx := timeout(t, time.Minute)
			name := "fair-earlier-" + how
			var armed, held atomic.Bool
			var passed atomic.Int32
			var landed sync.WaitGroup
			land := make(chan struct{})
			landOnce := sync.OnceFunc(func() { close(land) })
			t.Cleanup(landOnce)
			wc := redislock.New(heldBackConn{Conn: goRedis(t, d), armed: &armed, held: &held, passed: &passed, land: land, landed: &landed})
			t.Cleanup(func() { wc.Close() })
			other := newClient(t, d, goRedis)
			opts := []redislock.Option{redislock.WithTTL(30 * time.Second)}
			holder, err := other.NewFairMutex(name, opts...).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			armed.Store(true)
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			type result struct {
				l   dlock.Lease
				err error
			}
			done := make(chan result, 1)
			go func() {
				l, err := wc.NewFairMutex(name, opts...).Lock(wctx)
				done <- result{l, err}
			}()
			for !held.Load() {
				time.Sleep(time.Millisecond)
			}
			var r result
			switch how {
			case "cancelled", "lands-on-free-lock":
				for passed.Load() == 0 { // a later call, answered, renewed the place
					time.Sleep(time.Millisecond)
				}
				cancel()
				if r = <-done; !errors.Is(r.err, dlock.ErrNotObtained) {
					t.Fatalf("the waiter's Lock = %v; want ErrNotObtained", r.err)
				}
				if how == "lands-on-free-lock" {
					if err := holder.Release(ctx); err != nil {
						t.Fatal(err)
					}
				}
			case "after-own-grant":
				if err := holder.Release(ctx); err != nil {
					t.Fatal(err)
				}
				if r = <-done; r.err != nil {
					t.Fatalf("the waiter's Lock = %v", r.err)
				}
			}
			landOnce()
			landed.Wait()
			switch how {
			case "cancelled":
				if err := holder.Release(ctx); err != nil {
					t.Fatal(err)
				}
			case "after-own-grant":
				if err := r.l.Release(ctx); err != nil {
					t.Fatal(err)
				}
			}
			// A clean-up looks last about 4.3s after it begins (see
			// background.LateChecks); a place that stayed would keep
			// TryLock out for the waiter timeout, 30s.
			start := time.Now()
			for {
				l, err := other.NewFairMutex(name).TryLock(ctx)
				if err == nil {
					t.Logf("measured: TryLock granted %v after the late call landed", time.Since(start).Round(time.Millisecond))
					l.Release(ctx)
					break
				}
				if !errors.Is(err, dlock.ErrNotObtained) || time.Since(start) > 10*time.Second {
					t.Fatalf("TryLock %v after the late call landed, the waiter gone: %v", time.Since(start).Round(time.Millisecond), err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			if n, err := d.admin(t).Exists(ctx, lockKey(name)+":queue", lockKey(name)+":timeouts").Result(); err != nil || n > 0 {
				t.Errorf("queue keys left: exists=%d, err=%v", n, err)
			}
		})
	}
}
