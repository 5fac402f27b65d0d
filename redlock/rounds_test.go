package redlock_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock/redislock/transport"

	"github.com/dlock-go/dlock/internal/rediskeys"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redlock"
)

// countingConn counts the script calls that pass through a Conn.
type countingConn struct {
	redislock.Conn
	mu    sync.Mutex
	calls map[string]int
}

func (c *countingConn) Eval(ctx context.Context, calls []transport.Call, results []transport.Result) {
	c.mu.Lock()
	for _, call := range calls {
		c.calls[call.Script.Name]++
	}
	c.mu.Unlock()
	c.Conn.Eval(ctx, calls, results)
}

func (c *countingConn) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.calls
	c.calls = map[string]int{}
	return m
}

// Issue 18.4: when nothing failed, a grant takes two round trips, the
// acquire and nothing else: every node's fence counter was incremented by
// the acquire itself, and nodes that saw the same grants agree, so no
// fence is written back. Fences still increase with every grant, across
// clients, and a counter that disagrees is written back once.
func TestIntegrationGrantInOneRound(t *testing.T) {
	servers := testenv.StartRedisN(t, 5, testenv.RedisConfig{})
	age(t, servers)
	ctx := timeout(t, 30*time.Second)
	var counters []*countingConn
	newCounted := func() *redlock.Mutex {
		cs := make([]redislock.Conn, len(servers))
		for i, s := range servers {
			cc := &countingConn{Conn: goRedis(t, s.Addr()), calls: map[string]int{}}
			counters = append(counters, cc)
			cs[i] = cc
		}
		// A generous node timeout: an acquire that times out on a loaded
		// machine may land after its release, and the node holding the
		// stale key then misses a grant and disagrees at the next.
		c := redlock.New(cs, redlock.WithNodeTimeout(time.Second))
		t.Cleanup(func() { c.Close() })
		return c.NewMutex("rounds", redlock.WithTTL(5*time.Second))
	}
	mutexes := []*redlock.Mutex{newCounted(), newCounted()}
	calls := func() map[string]int {
		sum := map[string]int{}
		for _, cc := range counters {
			for k, v := range cc.take() {
				sum[k] += v
			}
		}
		return sum
	}
	// The slot's counters start equal, as those of nodes that have seen
	// the same grants are. (A slot's first grant lifts each node's
	// counter to its clock, rounded up to 100ms: when the nodes' clocks
	// straddle a step, that grant writes back; see the end.)
	for _, s := range servers {
		s.Do("SET", rediskeys.FenceKey("rounds"), fmt.Sprint(time.Now().UnixMicro()))
	}
	s0, _ := servers[0].Do("GET", rediskeys.FenceKey("rounds"))
	for _, s := range servers[1:] {
		s.Do("SET", rediskeys.FenceKey("rounds"), s0)
	}
	var last uint64
	for round := range 20 {
		l, err := mutexes[round%2].Lock(ctx)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if l.Fence() <= last {
			t.Fatalf("round %d: fence %d after %d", round, l.Fence(), last)
		}
		last = l.Fence()
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		gone(t, servers, "rounds")
		// Lock returns on a majority: the last node's call may still be
		// finishing. Count until all five of this round are in.
		got := calls()
		for end := time.Now().Add(2 * time.Second); got["quorum_acquire"] < 5 && time.Now().Before(end); {
			time.Sleep(10 * time.Millisecond)
			for k, v := range calls() {
				got[k] += v
			}
		}
		if got["quorum_acquire"] != 5 {
			t.Errorf("round %d: %d acquire calls; want one per node, 5", round, got["quorum_acquire"])
		}
		if got["quorum_fence"] > 0 {
			t.Errorf("round %d: %d fence write-backs; want none while the nodes' counters agree (%v)", round, got["quorum_fence"], got)
		}
	}

	// Counters that disagree (lost on one node, ahead on another) are
	// lifted and written back, once; the fence still increases. Nodes 3
	// and 4 are taken by someone else, so that every grant rests on nodes
	// 0, 1 and 2, and the one that disagrees counts.
	for _, s := range servers[3:] {
		s.Do("SET", lockKey("rounds"), "foreign", "PX", "60000")
	}
	servers[2].Do("DEL", rediskeys.FenceKey("rounds"))
	servers[1].Do("INCRBY", rediskeys.FenceKey("rounds"), "7")
	var rounds []int
	for round := range 5 {
		l, err := mutexes[0].Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if l.Fence() <= last {
			t.Fatalf("after the counters diverged, round %d: fence %d after %d", round, l.Fence(), last)
		}
		last = l.Fence()
		l.Release(ctx)
		gone(t, servers[:3], "rounds")
		rounds = append(rounds, calls()["quorum_fence"])
	}
	if rounds[0] == 0 || slices.Max(rounds[1:]) > 0 {
		t.Errorf("fence write-back calls in the grants after the counters diverged: %v; want some in the first only", rounds)
	}
	var vals []string
	for _, s := range servers[:3] {
		v, _ := s.Do("GET", rediskeys.FenceKey("rounds"))
		vals = append(vals, v)
	}
	if vals[0] != vals[1] || vals[1] != vals[2] {
		t.Errorf("the counters of the nodes that granted, after the write-back: %v; want them equal", vals)
	}
}
