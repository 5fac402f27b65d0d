package mysqllock_test

import (
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/granttest"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/mysqllock"
)

// In both modes, a grant whose replies take most of its lease to arrive is
// refreshed or given back, never returned short (see granttest.Check).
func TestIntegrationShortGrantNeverReturned(t *testing.T) {
	const ttl = 2 * time.Second
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel() // independent of the other mode: a proxy and names of its own
			db := sharedDB(t)
			p := testenv.StartProxy(t, db.Addr())
			name := unique("short-grant")
			slow := newClient(t, strings.Replace(db.DSN(), db.Addr(), p.Addr(), 1))
			fast := newClient(t, db.DSN())
			granttest.Check(t, granttest.Case{
				Slow:  m.newLocker(slow, name, mysqllock.WithTTL(ttl)),
				Fast:  m.newLocker(fast, name, mysqllock.WithTTL(ttl)),
				TTL:   ttl,
				Delay: p.SetLatency,
			})
		})
	}
}
