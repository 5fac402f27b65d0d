package redlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redisconn"
	"github.com/dlock-go/dlock/redlock"
)

// TestIntegrationElectionReadSplitWithOneSilent: the leader's record is on
// nodes 0 and 2, node 1 lost it (a restart without persistence), and node
// 2 is silent or refuses the reader: no majority agrees among the nodes
// that answer, while a majority holds the leader. Leader must neither wait
// the TTL for the silent node (f4991cd made a read wait up to it: an
// observer reading every second stalled that long, and so did Leader) nor
// say there is no leader: it cannot tell.
func TestIntegrationElectionReadSplitWithOneSilent(t *testing.T) {
	t.Parallel() // mostly waits, on servers of its own
	const ttl, nodeTimeout = 10 * time.Second, 100 * time.Millisecond
	servers := testenv.StartRedisN(t, 3, testenv.RedisConfig{})
	age(t, servers)
	addrs := addrsOf(servers)
	proxies, via := proxiesFor(t, addrs)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := "split-read"
	// The leader's keys outlive the test and are never written again: a
	// renewal would put the record back on node 1.
	leader := newClient(t, addrs, goRedis, redlock.WithNodeTimeout(time.Second)).NewElection(name, redlock.WithTTL(30*time.Second), redlock.WithoutRenewal())
	patient := func(t testing.TB, addr string) redisconn.Conn { return goRedisTimeout(t, addr, 2*ttl) }
	reader := newClient(t, via, patient, redlock.WithNodeTimeout(nodeTimeout)).NewElection(name, redlock.WithTTL(ttl))
	l, err := leader.Campaign(ctx, "leader")
	if err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	defer l.Release(context.Background())
	if got, err := reader.Leader(ctx); err != nil || got.Value != "leader" {
		t.Fatalf("Leader = %+v, %v; want leader", got, err)
	}
	// Node 1 loses the election's keys (a restart without persistence).
	if n, err := servers[1].Do("DEL", "dlock:{"+name+"}", "dlock:{"+name+"}:leader"); err != nil || n != "2" {
		t.Fatalf("DEL on node 1 = %v, %v; want 2 keys deleted", n, err)
	}
	for _, tc := range []struct {
		what string
		cut  func(p *testenv.Proxy)
	}{
		{"silent", func(p *testenv.Proxy) { p.Blackhole(true) }},
		{"refusing", func(p *testenv.Proxy) { p.Blackhole(false); p.SetRefuse(true); p.Reset() }},
	} {
		tc.cut(proxies[2])
		start := time.Now()
		got, err := reader.Leader(ctx)
		took := time.Since(start)
		t.Logf("measured: Leader with node 0 holding the record, node 1 none, node 2 %s: %+v, %v in %v", tc.what, got, err, took.Round(time.Millisecond))
		switch {
		case err == nil:
			t.Errorf("node 2 %s: Leader = %+v; want an error: only one node that answered holds it", tc.what, got)
		case errors.Is(err, dlock.ErrNoLeader):
			t.Errorf("node 2 %s: Leader: %v; want an error that is not ErrNoLeader: nodes 0 and 2 hold the leader", tc.what, err)
		case took >= ttl/2:
			t.Errorf("node 2 %s: Leader took %v; want the answer within a few node timeouts, not the TTL %v", tc.what, took, ttl)
		}
	}
}
