package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/rediskeys"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redlock"
	"github.com/redis/go-redis/v9"
)

// loseCounter deletes the fence counter on every node while their epochs
// stay: what an eviction (allkeys-lru picks a little-used slot's counter
// long before the epoch, which every acquire reads), an expiry or a DEL
// does. (Eviction itself, with filler keys, took the epoch along in one
// make test run: LRU is sampled.)
func loseCounter(t *testing.T, ctx context.Context, servers []*testenv.Redis, fence string) {
	t.Helper()
	// The fence argument covers a loss more than S + S' + 100ms after the
	// last grant (the lift rounds the clock to 100ms): a counter lost at
	// once may come back at the last grant's own 100ms.
	time.Sleep(500 * time.Millisecond)
	for _, s := range servers {
		c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
		defer c.Close()
		if n, err := c.Del(ctx, fence).Result(); err != nil || n != 1 {
			t.Fatalf("%s: DEL %s = %d, %v; want the counter there to delete", s.Addr(), fence, n, err)
		}
		if c.Exists(ctx, "dlock:epoch").Val() != 1 {
			t.Fatalf("%s: no epoch; the test needs it kept", s.Addr())
		}
	}
}

// A fence counter that a running node loses while its epoch stays (an
// eviction, as here, an expiry or a DEL) comes back, at the next grant,
// above every fence granted before: the node lifts it to its clock, as
// the fence argument in docs/ARCHITECTURE.md requires of a loss more than
// S + S' + 100ms after the last grant. A floor, a clock reading the node
// stored once when it outlasted the restart window, is below fences
// granted since on that slot, and lifting the counter to it, or to the
// largest floor the Client knows, gave an earlier fence again (issue 35's
// floor lift: the fence of the first grant of the slot). The Client that
// granted before and a new Client (which guesses the slot fresh) both
// draw a larger fence.
func TestIntegrationEvictedCounterDoesNotLowerFence(t *testing.T) {
	servers := testenv.StartRedisN(t, 3, testenv.RedisConfig{})
	age(t, servers)
	ctx := timeout(t, 60*time.Second)
	const name = "evicted-counter"
	fence := rediskeys.FenceKey(name)
	a := newClient(t, addrsOf(servers), goRedis, redlock.WithNodeTimeout(time.Second))
	lock := func(c *redlock.Client) uint64 {
		t.Helper()
		l, err := c.NewMutex(name, redlock.WithoutRenewal()).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		gone(t, servers, name)
		return l.Fence()
	}
	var last uint64
	for range 3 {
		last = lock(a)
	}
	for _, c := range []struct {
		who string
		c   *redlock.Client
	}{
		{"the Client that granted before", a},
		{"a new Client", newClient(t, addrsOf(servers), goRedis, redlock.WithNodeTimeout(time.Second))},
	} {
		loseCounter(t, ctx, servers, fence)
		if f := lock(c.c); f <= last {
			t.Errorf("%s, after the slot's counter was lost on every node: fence %d, not above the last fence %d", c.who, f, last)
		} else {
			last = f
		}
	}
}
