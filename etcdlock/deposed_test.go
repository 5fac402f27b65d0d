package etcdlock_test

import (
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/internal/testenv"
)

// A holder whose client reaches the cluster through the leader's endpoint
// only (as behind a load balancer) sends a renewal while the leader is
// paused; the cluster elects another leader, and on resuming the old one
// answers the renewal from its own lease table before it learns it was
// deposed, and is killed a moment later. The new leader never saw that
// renewal: it expires the etcd lease one TTL after its own promotion. The
// holder must not count on the renewal, or a waiter is granted the lock
// before the holder's Until (etcd-io/etcd#15247, #13675). Run on Debian's
// etcd 3.4.23 and on EtcdBuildVersion, whose server checks its leadership
// before a renewal.
func TestIntegrationDeposedLeaderRenewal(t *testing.T) {
	testenv.SkipIfShort(t, "needs an etcd cluster")
	servers := []struct{ name, bin string }{{"debian", ""}, {"v" + testenv.EtcdBuildVersion, testenv.RequireBuiltEtcd(t)}}
	const rounds = 2
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			t.Parallel()
			c := testenv.StartEtcdClusterWith(t, srv.bin, 3)
			overlaps := 0
			for round := range rounds {
				if deposedRound(t, c, round) {
					overlaps++
				}
			}
			if overlaps > 0 {
				t.Errorf("%d of %d rounds granted the waiter before the holder's Until", overlaps, rounds)
			}
		})
	}
}

// deposedRound plays the fault once on c and reports whether the waiter
// was granted the lock before the holder's Until, with the holder's Done
// still open.
func deposedRound(t *testing.T, c *testenv.EtcdCluster, round int) bool {
	t.Helper()
	ctx := ctxFor(t, time.Minute)
	const ttl = 6 * time.Second
	if err := c.WaitHealthy(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	leader, err := c.Leader()
	if err != nil {
		t.Fatal(err)
	}
	var others []string
	for _, e := range c.Members {
		if e != leader {
			others = append(others, e.Addr())
		}
	}
	name := "deposed-" + string(rune('a'+round))
	holder := connect(t, []string{leader.Addr()}).NewMutex(name, etcdlock.WithTTL(ttl))
	waiter := connect(t, others).NewMutex(name, etcdlock.WithTTL(ttl))
	l, err := holder.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Just after a renewal, so that the next one is sent while the leader
	// is paused.
	for u := l.Until(); !l.Until().After(u); {
		time.Sleep(5 * time.Millisecond)
	}
	if err := leader.Pause(); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	untilAtPause := l.Until()
	type result struct {
		l   dlock.Lease
		err error
		at  time.Time
	}
	got := make(chan result, 1)
	go func() {
		next, err := waiter.Lock(ctx)
		got <- result{next, err, time.Now()}
	}()
	time.Sleep(3 * time.Second)
	if err := leader.Resume(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	if err := leader.Kill(); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("waiter: %v", r.err)
	}
	overlap := false
	select {
	case <-l.Done():
	default:
		if r.at.Before(l.Until()) {
			overlap = true
		}
	}
	t.Logf("round %d: holder's Until moved %v after the pause; waiter granted %v after the pause, %v before the holder's Until (holder's Err %v)",
		round, l.Until().Sub(untilAtPause).Round(time.Millisecond), r.at.Sub(paused).Round(time.Millisecond),
		l.Until().Sub(r.at).Round(time.Millisecond), l.Err())
	if r.l.Fence() <= l.Fence() {
		t.Errorf("waiter's fence %d; want above the holder's %d", r.l.Fence(), l.Fence())
	}
	r.l.Release(ctx)
	<-l.Done()
	if err := leader.Restart(); err != nil {
		t.Fatal(err)
	}
	return overlap
}
