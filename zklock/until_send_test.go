package zklock_test

import (
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/zklock"
)

// A confirmation's Until counts from the send of its sync, never from
// its answer: with every answer L late, a confirmation (a sync, then an
// Exists) is answered at least 2L after it was sent, so whenever the
// lease is looked at its Until is at most span-2L ahead.
func TestIntegrationUntilCountsFromSend(t *testing.T) {
	t.Parallel()
	z := sharedZK(t)
	p := testenv.StartProxy(t, z.Addr())
	c := connect(t, []string{p.Addr()}, zklock.WithSessionTimeout(9*time.Second))
	ctx := ctxFor(t, time.Minute)
	const span = 3 * time.Second
	const lat = 550 * time.Millisecond
	l, err := c.NewMutex(uniquePath(t), zklock.WithTTL(span)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p.SetReplyLatency(lat)
	time.Sleep(span) // confirmations sent before the latency are answered
	var worst time.Duration
	for end := time.Now().Add(span); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		u := l.Until()
		if ahead := time.Until(u); ahead > worst {
			worst = ahead
		}
	}
	t.Logf("measured: Until at most %v ahead (span %v, answers %v late)", worst.Round(time.Millisecond), span, lat)
	if worst > span-2*lat {
		t.Errorf("Until %v ahead; a confirmation answered >= %v after its send gives at most %v", worst, 2*lat, span-2*lat)
	}
	if l.Err() != nil {
		t.Fatalf("lease ended: %v", l.Err())
	}
	p.SetReplyLatency(0)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
