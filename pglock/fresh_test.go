package pglock_test

import (
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/granttest"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/pglock"
)

// In both modes, a grant whose replies take most of its lease to arrive is
// refreshed or given back, never returned short (see granttest.Check).
func TestIntegrationShortGrantNeverReturned(t *testing.T) {
	const ttl = 2 * time.Second
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel() // independent of the others: names (and proxy, or server) of its own
			p := testenv.StartProxy(t, sharedDB(t).Addr())
			name := unique("short-grant")
			slow := newClient(t, via(sharedDB(t), p.Addr(), unique("slow")))
			fast := newClient(t, sharedDB(t).URL())
			granttest.Check(t, granttest.Case{
				Slow:  m.newLocker(slow, name, pglock.WithTTL(ttl)),
				Fast:  m.newLocker(fast, name, pglock.WithTTL(ttl)),
				TTL:   ttl,
				Delay: p.SetLatency,
			})
		})
	}
}
