package redlock_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/rediskeys"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redlock"
	"github.com/redis/go-redis/v9"
)

// evictCounter makes each server evict the fence counter key and nothing
// of dlock's else, as memory pressure under allkeys-lru does to the
// counter of a slot that no grant has used for a while: the counter's LRU
// clock (one-second resolution) is older than the epoch's, which the test
// reads just before, and than the filler's. It then lifts maxmemory and
// deletes the filler.
func evictCounter(t *testing.T, ctx context.Context, servers []*testenv.Redis, fence string) {
	t.Helper()
	time.Sleep(2100 * time.Millisecond) // the counter's LRU clock falls two seconds behind
	for _, s := range servers {
		c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
		defer c.Close()
		if err := c.HGetAll(ctx, "dlock:epoch").Err(); err != nil { // touches the epoch
			t.Fatal(err)
		}
		info, err := c.Info(ctx, "memory").Result()
		if err != nil {
			t.Fatal(err)
		}
		var used int64
		for _, line := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
				used = atoi(v)
			}
		}
		for _, kv := range [][2]string{{"maxmemory-samples", "64"}, {"maxmemory-policy", "allkeys-lru"},
			{"maxmemory", fmt.Sprint(used + 256<<10)}} {
			if err := c.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
				t.Fatal(err)
			}
		}
		filler := strings.Repeat("x", 4<<10)
		i := 0
		for ; c.Exists(ctx, fence).Val() == 1; i++ {
			if i == 10000 {
				t.Fatalf("%s: the counter %s is not evicted after %d filler keys", s.Addr(), fence, i)
			}
			if err := c.Set(ctx, fmt.Sprint("filler:", i), filler, 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if c.Exists(ctx, "dlock:epoch").Val() != 1 {
			t.Fatalf("%s: the epoch was evicted with the counter; the test needs it kept", s.Addr())
		}
		c.ConfigSet(ctx, "maxmemory", "0")
		for j := range i {
			c.Del(ctx, fmt.Sprint("filler:", j))
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
		evictCounter(t, ctx, servers, fence)
		if f := lock(c.c); f <= last {
			t.Errorf("%s, after the slot's counter was evicted on every node: fence %d, not above the last fence %d", c.who, f, last)
		} else {
			last = f
		}
	}
}
