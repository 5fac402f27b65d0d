package zklock_test

import (
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/zklock"
)

// A slow round trip is paid once out of a lease's margin, not twice: the
// next confirmation is due a period after the last one was sent (its
// Until counts from then), not a period after its answer. Every answer
// here comes 550ms late, so a confirmation (a sync and an Exists) takes
// 1.1s, with a 3s span and a 1s period: counted from the answer, the next
// one was sent 2.1s after the last and answered 3.2s after it, past the
// 2.97s Until, and the lease lapsed; a loaded machine (conformance
// Renewal, 900ms span, at load 40) lost leases the same way. Counted from
// the send, each answer comes 2.2s after the last was sent: 770ms to
// spare for the load the machine adds.
func TestIntegrationSlowConfirmationsHold(t *testing.T) {
	t.Parallel()
	z := sharedZK(t)
	p := testenv.StartProxy(t, z.Addr())
	c := connect(t, []string{p.Addr()}, zklock.WithSessionTimeout(9*time.Second))
	ctx := ctxFor(t, time.Minute)
	const span = 3 * time.Second // min(TTL, T/3)
	l, err := c.NewMutex(uniquePath(t), zklock.WithTTL(span)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p.SetReplyLatency(550 * time.Millisecond)
	first := l.Until()
	select {
	case <-l.Done():
		t.Fatalf("lease ended with every answer 550ms late (confirmations of 1.1s, span %v): %v", span, l.Err())
	case <-time.After(2*span + span/3):
	}
	if !l.Until().After(first.Add(span)) {
		t.Errorf("Until moved from %v to %v; want confirmed past one span more", first, l.Until())
	}
	p.SetReplyLatency(0)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
