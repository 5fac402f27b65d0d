package redislock_test

import (
	"context"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/redis/go-redis/v9"
)

// The election suites run beside the conformance suites, each on servers
// of its own (see TestIntegrationConformanceStandalone).
func TestIntegrationElectionStandalone(t *testing.T) {
	t.Parallel()
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			dlocktest.RunElection(t, electionBackend(standalone(t), tr.open))
		})
	}
}

func TestIntegrationElectionCluster(t *testing.T) {
	t.Parallel()
	dlocktest.RunElection(t, electionBackend(cluster(t), goRedis))
}

// A leader cut off from Redis (its connection blackholed by a proxy, as a
// paused process or a partition would leave it) learns it lost the
// leadership by its lease's Until; a waiting campaign wins once the key
// expires, and an observer sees the new term.
func TestIntegrationElectionLeaderCutOff(t *testing.T) {
	t.Parallel()
	const ttl = time.Second
	d := standalone(t)
	proxy := testenv.StartProxy(t, d.addrs()[0])
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	cutOff := redislock.New(goredisconn.New(rdb))
	t.Cleanup(func() { cutOff.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	name := "cut-off-leader"
	leader, err := cutOff.NewElection(name, redislock.WithTTL(ttl)).Campaign(ctx, "cut-off")
	if err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	observed := newClient(t, d, goRedis).NewElection(name).Observe(ctx)
	if l := <-observed; l.Term != leader.Fence() {
		t.Fatalf("observer saw %+v; want term %d", l, leader.Fence())
	}
	won := make(chan dlock.Lease, 1)
	go func() {
		l, err := newClient(t, d, goRedis).NewElection(name, redislock.WithTTL(ttl)).Campaign(ctx, "next")
		if err != nil {
			t.Errorf("Campaign(next): %v", err)
		}
		won <- l
	}()
	time.Sleep(100 * time.Millisecond)
	// Done by Until, judged against a timer due at Until: a loaded
	// machine runs both late.
	doneByUntil := dlocktest.WatchDoneByUntil(t, leader)
	proxy.Blackhole(true)
	cut := time.Now()
	doneByUntil(ttl+dlocktest.Slack, "the leader was cut off")
	next := <-won
	if next == nil {
		return
	}
	took := time.Since(cut)
	t.Logf("measured: new leader %v after the leader was cut off (TTL %v)", took.Round(time.Millisecond), ttl)
	if bound := ttl + 512*time.Millisecond + dlocktest.Slack; took > bound { // DefaultRetry's longest sleep
		t.Errorf("new leader after %v; want within %v", took, bound)
	}
	if next.Fence() <= leader.Fence() {
		t.Fatalf("new term %d not above %d", next.Fence(), leader.Fence())
	}
	select {
	case l := <-observed:
		if l.Value != "next" || l.Term != next.Fence() {
			t.Fatalf("observer saw %+v; want {next %d}", l, next.Fence())
		}
	case <-time.After(2 * time.Second):
		t.Fatal("observer did not see the new leader within 2s")
	}
}
