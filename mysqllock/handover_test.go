package mysqllock_test

import (
	"slices"
	"testing"
	"time"
)

// How long a waiter on another Client takes to see a release, which it
// learns only by polling (DefaultRetry caps the poll at 64ms); and a
// waiter on the same Client, which the release wakes at once.
func TestIntegrationWakeUpLatency(t *testing.T) {
	srv := sharedDB(t)
	ctx := ctxFor(t, 2*time.Minute)
	const rounds = 25
	for _, md := range modes {
		for _, same := range []bool{false, true} {
			key := unique("wake")
			holderClient := newClient(t, srv.DSN())
			waiterClient := holderClient
			if !same {
				waiterClient = newClient(t, srv.DSN())
			}
			var lat []time.Duration
			for range rounds {
				held, err := md.newLocker(holderClient, key).TryLock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				got, done := make(chan time.Time, 1), make(chan struct{})
				go func() {
					defer close(done)
					l, err := md.newLocker(waiterClient, key).Lock(ctx)
					if err != nil {
						t.Error(err)
						got <- time.Time{}
						return
					}
					got <- time.Now()
					l.Release(ctx)
				}()
				time.Sleep(80 * time.Millisecond) // the waiter is at its longest poll
				released := time.Now()
				if err := held.Release(ctx); err != nil {
					t.Fatal(err)
				}
				at := <-got
				<-done
				if at.IsZero() {
					return
				}
				lat = append(lat, at.Sub(released))
			}
			slices.Sort(lat)
			var sum time.Duration
			for _, d := range lat {
				sum += d
			}
			t.Logf("%s mode, waiter on the %s: release to Lock returning: mean %v, median %v, max %v over %d rounds",
				md.name, map[bool]string{true: "same Client", false: "another Client"}[same],
				(sum / rounds).Round(100*time.Microsecond), lat[rounds/2].Round(100*time.Microsecond), lat[rounds-1].Round(100*time.Microsecond), rounds)
			// The bound: one full poll interval, plus the waiter's attempt.
			if bound := 64*time.Millisecond + dlockSlack; lat[rounds/2] > bound {
				t.Errorf("median wake-up %v; want within %v", lat[rounds/2], bound)
			}
		}
	}
}
