package redislock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/redislock"
)

// A release wakes one of a client's waiters of a Mutex, not all of them:
// the others would only try, fail and go back to sleep. Each of 8
// goroutines of one client gets the lock in turn, one attempt per
// hand-over.
func TestIntegrationReleaseWakesOneWaiterPerClient(t *testing.T) {
	d := standalone(t)
	ctx := timeout(t, time.Minute)
	holder := newClient(t, d, goRedis).NewMutex("wake-one", redislock.WithTTL(time.Minute))
	first, err := holder.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	counter := &countingConn{Conn: goRedis(t, d)}
	c := redislock.New(counter)
	t.Cleanup(func() { c.Close() })
	slowPoll := redislock.WithRetry(dlock.LinearBackoff(time.Minute, time.Minute))
	const waiters = 8
	var wg sync.WaitGroup
	got := make(chan dlock.Lease)
	for range waiters {
		wg.Go(func() {
			l, err := c.NewMutex("wake-one", redislock.WithTTL(time.Minute), slowPoll).Lock(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			got <- l
		})
	}
	time.Sleep(500 * time.Millisecond) // every waiter has tried once and waits
	before := counter.calls.Load()
	first.Release(ctx)
	for i := range waiters {
		select {
		case l := <-got:
			l.Release(context.Background())
		case <-time.After(10 * time.Second):
			t.Fatalf("waiter %d of %d was not woken", i+1, waiters)
		}
	}
	wg.Wait()
	// Per hand-over: one acquire and one release. Waking every waiter
	// costs up to 8 acquires per hand-over instead.
	if calls := counter.calls.Load() - before; calls > 2*waiters+2 {
		t.Errorf("%d script calls for %d hand-overs; want about %d (one acquire and one release each)", calls, waiters, 2*waiters)
	}
}
