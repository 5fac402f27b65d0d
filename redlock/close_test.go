package redlock_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redisconn"
	"github.com/dlock-go/dlock/redlock"
)

// leftKeys returns, for each server, the lock key's value and remaining
// TTL, or "" when it is absent.
func leftKeys(t testing.TB, servers []*testenv.Redis, name string) []string {
	var left []string
	for _, s := range servers {
		v, err := s.Do("GET", lockKey(name))
		if err != nil {
			t.Fatal(err)
		}
		if v != "" {
			pttl, _ := s.Do("PTTL", lockKey(name))
			left = append(left, fmt.Sprintf("%s holds %q for %sms", s.Addr(), v, pttl))
		}
	}
	return left
}

// Issue 17.2: Close waits for the clean-up of failed attempts, so that a
// process that fails to lock and exits at once (dlock run) leaves nothing
// behind on the nodes.
func TestIntegrationCloseFinishesCleanups(t *testing.T) {
	t.Run("fresh nodes", func(t *testing.T) {
		// New nodes abstain: the attempt takes the key on all three and
		// fails, as "dlock run job -- true" did on a new deployment. No
		// majority can vote: it is unavailable (issue 32).
		servers := testenv.StartRedisN(t, 3, testenv.RedisConfig{})
		ctx := timeout(t, 10*time.Second)
		c := newClient(t, addrsOf(servers), goRedis)
		_, err := c.NewMutex("job").TryLock(ctx)
		if !errors.Is(err, dlock.ErrUnavailable) || errors.Is(err, dlock.ErrNotObtained) {
			t.Fatalf("TryLock on new nodes = %v; want ErrUnavailable, not ErrNotObtained", err)
		}
		start := time.Now()
		if err := c.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		t.Logf("Close took %v", time.Since(start))
		if left := leftKeys(t, servers, "job"); len(left) > 0 {
			t.Errorf("after a failed TryLock and Close: %s", strings.Join(left, "; "))
		}
	})
	t.Run("held elsewhere", func(t *testing.T) {
		servers := testenv.StartRedisN(t, 3, testenv.RedisConfig{})
		age(t, servers)
		for _, s := range servers[:2] {
			s.Do("SET", lockKey("busy"), "foreign", "PX", "60000")
		}
		ctx := timeout(t, 10*time.Second)
		c := newClient(t, addrsOf(servers), goRedis)
		if _, err := c.NewMutex("busy").TryLock(ctx); !errors.Is(err, dlock.ErrNotObtained) {
			t.Fatalf("TryLock with 2 of 3 nodes held = %v; want ErrNotObtained", err)
		}
		if err := c.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if v := values(servers, "busy"); v[0] != "foreign" || v[1] != "foreign" || v[2] != "" {
			t.Errorf("after a failed TryLock and Close the nodes hold %q; want only the foreign values", v)
		}
	})
	t.Run("concurrent runs", func(t *testing.T) {
		// Six processes run the same job at once, each with its own
		// Client: one may hold the lock and releases it; each closes at
		// once. Afterwards no key is left on any node.
		servers := testenv.StartRedisN(t, 3, testenv.RedisConfig{})
		age(t, servers)
		for round := range 10 {
			var wg sync.WaitGroup
			for range 6 {
				wg.Go(func() {
					// A node timeout of a second: with the default 50ms a
					// loaded machine cuts acquires that then land after
					// Close's last look (8 of 8 runs at load 7); such keys
					// expire within the TTL, as the package doc says, but
					// this test is about the clean-ups Close finishes.
					c := redlock.New(conns(t, servers), redlock.WithNodeTimeout(time.Second))
					ctx := timeout(t, 10*time.Second)
					if l, err := c.NewMutex("shared").TryLock(ctx); err == nil {
						l.Release(ctx)
					}
					if err := c.Close(); err != nil {
						t.Errorf("Close: %v", err)
					}
				})
			}
			wg.Wait()
			if left := leftKeys(t, servers, "shared"); len(left) > 0 {
				t.Fatalf("round %d: after 6 runs closed: %s", round, strings.Join(left, "; "))
			}
		}
	})
}

// conns opens a new go-redis connection to each server.
func conns(t testing.TB, servers []*testenv.Redis) []redisconn.Conn {
	cs := make([]redisconn.Conn, len(servers))
	for i, s := range servers {
		cs[i] = goRedis(t, s.Addr())
	}
	return cs
}

// Close does not wait for a node that is down: its clean-ups make one last
// pass (each call bounded by the node timeout) and stop. What the node may
// hold expires within its TTL.
func TestIntegrationCloseWithDeadNode(t *testing.T) {
	servers := testenv.StartRedisN(t, 3, testenv.RedisConfig{})
	age(t, servers)
	clients := make([]*redlock.Client, len(transports))
	for i, tr := range transports {
		clients[i] = newClient(t, addrsOf(servers), tr.open) // rueidis dials at once
	}
	servers[2].Kill()
	for i, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			c := clients[i]
			ctx := timeout(t, 10*time.Second)
			for _, name := range []string{"dead-a", "dead-b"} {
				l, err := c.NewMutex(name).Lock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				l.Release(ctx)
			}
			start := time.Now()
			err := c.Close()
			// A clean-up that waited for the dead node would retry it
			// until the TTL (30s), and Close would give up after its five
			// seconds with an error. Close does wait for the late looks
			// on a live node whose acquire timed out, as it may on a
			// loaded machine: 1.3 seconds and a node timeout, within the
			// five.
			t.Logf("Close took %v", time.Since(start))
			if err != nil {
				t.Errorf("Close with one of three nodes down: %v", err)
			}
			for _, name := range []string{"dead-a", "dead-b"} {
				if left := leftKeys(t, servers[:2], name); len(left) > 0 {
					t.Errorf("after Close: %s", strings.Join(left, "; "))
				}
			}
		})
	}
}
