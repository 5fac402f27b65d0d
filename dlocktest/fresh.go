package dlocktest

import (
	"testing"
	"time"
)

// grantNotShort: a grant that reaches the client with little of its lease
// left, because the server stopped between the request and its answer, is
// refreshed or given back. Lock and TryLock never return a lease with less
// than a third of its lease time left.
//
// The request goes out while the server is stopped, and the answer comes
// when it resumes, nine tenths of a lease time later: a backend whose
// Until counts from the request (Redis, PostgreSQL, MySQL) gets a grant
// with a tenth of its lease left. One that times out a silent server
// sooner (Redlock, etcd) fails the TryLock instead; one that sends a
// request after the pause to decide (ZooKeeper's listing) gets a full
// lease. Either is right; a short lease is not.
func (s *suite) grantNotShort(t *testing.T) {
	for _, try := range []bool{true, false} {
		name := map[bool]string{true: "TryLock", false: "Lock"}[try]
		t.Run(name, func(t *testing.T) {
			key := uniqueKey(t)
			l := s.b.NewLocker(t, key, Options{TTL: 2 * time.Second})
			ctx := ctxFor(t, time.Minute)
			// What a grant has left when nothing stops the server: the
			// lease time (a ZooKeeper lock's may be shorter than the TTL)
			// less the drift allowance and one round trip.
			first := mustLock(t, ctx, l)
			full := time.Until(first.Until())
			if err := first.Release(ctx); err != nil {
				t.Fatalf("Release: %v", err)
			}
			paused := make(chan struct{})
			go func() { defer close(paused); s.b.Pause(t, full*9/10) }()
			defer func() { <-paused }()
			time.Sleep(full / 20) // let the server stop before the request goes out
			take := l.Lock
			if try {
				take = l.TryLock
			}
			got, err := take(ctx)
			switch {
			case err != nil && try:
				t.Logf("TryLock during the pause: %v", err)
				return
			case err != nil:
				t.Fatalf("Lock across the pause: %v", err)
			}
			left := time.Until(got.Until())
			if left < full/3-Slack {
				t.Errorf("%s returned a lease with %v left of the %v a grant has; want at least a third", name, left.Round(time.Millisecond), full.Round(time.Millisecond))
			}
			if err := got.Release(ctx); err != nil {
				t.Errorf("Release: %v", err)
			}
		})
	}
}
