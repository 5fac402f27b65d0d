package fence_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock/fence"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redisconn"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/redis/go-redis/v9"
)

// redisGuard starts a redis-server that persists every write, as a
// Redis guard needs, and returns a guard for it, and the server.
func redisGuard(t *testing.T) (*fence.Redis, *testenv.Redis) {
	srv := testenv.StartRedis(t, testenv.RedisConfig{Persistence: true})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { rdb.Close() })
	return fence.NewRedis(goredisconn.New(rdb)), srv
}

// Set and HSet write with the newest fence, and again with the same one,
// and refuse a lower one, writing nothing; on one server and on a Cluster,
// for keys with and without a hash tag.
func TestIntegrationRedisWrites(t *testing.T) {
	single, _ := redisGuard(t)
	cluster := testenv.StartCluster(t, 3)
	for _, n := range cluster.Nodes {
		for _, kv := range [][2]string{{"appendonly", "yes"}, {"appendfsync", "always"}} {
			if _, err := n.Do("CONFIG", "SET", kv[0], kv[1]); err != nil {
				t.Fatal(err)
			}
		}
	}
	crdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs()})
	t.Cleanup(func() { crdb.Close() })
	for _, d := range []struct {
		name  string
		guard *fence.Redis
		rdb   redis.UniversalClient
	}{
		{"standalone", single, nil},
		{"cluster", fence.NewRedis(goredisconn.New(crdb)), crdb},
	} {
		t.Run(d.name, func(t *testing.T) {
			ctx := ctxFor(t, 30*time.Second)
			for _, key := range []string{unique("report"), "{" + unique("acct") + "}:balance"} {
				g := d.guard
				for _, step := range []struct {
					fence uint64
					value string
					stale bool
				}{{100, "a", false}, {100, "b", false}, {101, "c", false}, {100, "d", true}, {99, "e", true}} {
					err := g.Set(ctx, key, step.fence, step.value)
					if step.stale != errors.Is(err, fence.ErrStale) || !step.stale && err != nil {
						t.Fatalf("Set(%q, %d): %v; want stale: %v", key, step.fence, err, step.stale)
					}
					hkey := key + ":h"
					err = g.HSet(ctx, hkey, step.fence, "v", step.value, "n", fmt.Sprint(step.fence))
					if step.stale != errors.Is(err, fence.ErrStale) || !step.stale && err != nil {
						t.Fatalf("HSet(%q, %d): %v; want stale: %v", hkey, step.fence, err, step.stale)
					}
				}
				if d.rdb != nil {
					if v, err := d.rdb.Get(ctx, key).Result(); err != nil || v != "c" {
						t.Fatalf("GET %s: %q, %v; want c", key, v, err)
					}
					if v, err := d.rdb.HGetAll(ctx, key+":h").Result(); err != nil || v["v"] != "c" || v["n"] != "101" {
						t.Fatalf("HGETALL %s:h: %v, %v; want v=c n=101", key, v, err)
					}
				}
				var se *fence.StaleError
				if err := g.Set(ctx, key, 7, "x"); !errors.As(err, &se) || se.Newest != 101 || se.Fence != 7 {
					t.Fatalf("stale Set: %v; want a StaleError with Newest 101", err)
				}
			}
		})
	}
}

// The script may be sent twice (a transport that re-sends after a lost
// reply): both runs succeed and leave what one would.
func TestIntegrationRedisResent(t *testing.T) {
	_, srv := redisGuard(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { rdb.Close() })
	twice := twiceConn{goredisconn.New(rdb)}
	g := fence.NewRedis(twice)
	ctx := ctxFor(t, 10*time.Second)
	key := unique("resent")
	if err := g.Set(ctx, key, 5, "v5"); err != nil {
		t.Fatal(err)
	}
	if err := g.HSet(ctx, key+":h", 5, "f", "v5"); err != nil {
		t.Fatal(err)
	}
	if err := g.Set(ctx, key, 4, "v4"); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("Set with fence 4 after 5: %v; want ErrStale", err)
	}
	if v, _ := rdb.Get(ctx, key).Result(); v != "v5" {
		t.Fatalf("GET: %q; want v5", v)
	}
}

// twiceConn sends every call twice in one round trip and returns the
// second run's result.
type twiceConn struct{ redisconn.Conn }

// Command passes a plain command on, so that the guard can read the
// server's persistence through the wrapper.
func (c twiceConn) Command(ctx context.Context, args ...string) redisconn.Result {
	return c.Conn.(interface {
		Command(context.Context, ...string) redisconn.Result
	}).Command(ctx, args...)
}

func (c twiceConn) Eval(ctx context.Context, calls []redisconn.Call, results []redisconn.Result) {
	doubled := make([]redisconn.Call, 0, 2*len(calls))
	for _, call := range calls {
		doubled = append(doubled, call, call)
	}
	out := make([]redisconn.Result, len(doubled))
	c.Conn.Eval(ctx, doubled, out)
	for i := range results {
		if out[2*i].Err != nil {
			results[i] = out[2*i]
			continue
		}
		results[i] = out[2*i+1]
	}
}

// Concurrent writers with fences 1 to n: the last value is the highest
// fence's, whatever the order they ran in.
func TestIntegrationRedisConcurrent(t *testing.T) {
	g, srv := redisGuard(t)
	ctx := ctxFor(t, 30*time.Second)
	key := unique("race")
	const n = 64
	var wg sync.WaitGroup
	for f := range uint64(n) {
		wg.Go(func() {
			if err := g.Set(ctx, key, f+1, fmt.Sprint(f+1)); err != nil && !errors.Is(err, fence.ErrStale) {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if v, err := srv.Do("GET", key); err != nil || v != fmt.Sprint(n) {
		t.Fatalf("GET %s: %q, %v; want %d", key, v, err, n)
	}
}

// Bad input is refused with an error naming it, before the server.
func TestRedisInput(t *testing.T) {
	g := fence.NewRedis(goredisconn.New(nil))
	ctx := ctxFor(t, time.Second)
	for _, c := range []struct {
		err  error
		want string
	}{
		{g.Set(ctx, "", 1, "v"), "empty"},
		{g.Set(ctx, "k", 0, "v"), "fence 0"},
		{g.Set(ctx, "a}b", 1, "v"), "hash tag"},
		{g.HSet(ctx, "k", 1, "f"), "pairs"},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%v; want an error about %q", c.err, c.want)
		}
	}
	for key, want := range map[string]string{"a": "dlock:guard:{a}", "x{t}y": "dlock:guard:x{t}y", "a{b": "dlock:guard:{a{b}"} {
		if got, err := fence.RedisKey(key); err != nil || got != want {
			t.Errorf("RedisKey(%q) = %q, %v; want %q", key, got, err, want)
		}
	}
}

// A write to a key of another type is an error that writes nothing, not
// even the fence.
func TestIntegrationRedisWrongType(t *testing.T) {
	g, srv := redisGuard(t)
	ctx := ctxFor(t, 10*time.Second)
	key := unique("typed")
	if err := g.HSet(ctx, key, 5, "f", "v"); err != nil {
		t.Fatal(err)
	}
	err := g.Set(ctx, key, 6, "v")
	if err == nil || errors.Is(err, fence.ErrStale) || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Fatalf("Set of a hash: %v; want WRONGTYPE", err)
	}
	fk, _ := fence.RedisKey(key)
	if v, _ := srv.Do("GET", fk); v != "5" {
		t.Fatalf("the fence after a refused write: %q; want 5", v)
	}
}

// A key under the guard's own prefix is refused, as input: a Set of
// "dlock:guard:{k}" would overwrite the fence of k, after which a stale
// holder of k writes.
func TestIntegrationRedisGuardPrefix(t *testing.T) {
	g, srv := redisGuard(t)
	ctx := ctxFor(t, 10*time.Second)
	key := unique("ledger")
	fk, _ := fence.RedisKey(key)
	if err := g.Set(ctx, key, 100, "v100"); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"Set":   g.Set(ctx, fk, 1, "1"),
		"HSet":  g.HSet(ctx, fk, 1, "f", "1"),
		"Check": g.Check(ctx, fk, 1),
	} {
		if err == nil || !strings.Contains(err.Error(), "dlock:guard:") {
			t.Errorf("%s of %q, the fence key of %q: %v; want an error naming the guard's prefix", name, fk, key, err)
		}
	}
	if _, err := fence.RedisKey(fk); err == nil {
		t.Errorf("RedisKey(%q): no error", fk)
	}
	if err := g.Set(ctx, key, 50, "v50"); !errors.Is(err, fence.ErrStale) {
		t.Errorf("Set of %q with fence 50 after 100: %v; want ErrStale", key, err)
	}
	if v, _ := srv.Do("GET", key); v != "v100" {
		t.Errorf("%q holds %q; want v100", key, v)
	}
}
