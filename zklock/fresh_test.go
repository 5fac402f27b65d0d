package zklock_test

import (
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/granttest"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/zklock"
)

// A grant whose listing's reply takes most of its lease to arrive is
// refreshed or given back, never returned short (see granttest.Check).
// The lease time is a third of the session timeout.
func TestIntegrationShortGrantNeverReturned(t *testing.T) {
	const ttl = 2 * time.Second
	z := sharedZK(t)
	p := testenv.StartProxy(t, z.Addr())
	path := uniquePath(t)
	slow := connect(t, []string{p.Addr()}, zklock.WithSessionTimeout(3*ttl))
	fast := connect(t, []string{z.Addr()}, zklock.WithSessionTimeout(3*ttl))
	// A lock held beside it keeps their common parent, a container node,
	// from being reaped whenever the lock is free: a create through the
	// slow link would race the reaper.
	keep, err := fast.NewMutex(path + "-keep").Lock(ctxFor(t, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer keep.Release(ctxFor(t, time.Minute))
	granttest.Check(t, granttest.Case{
		Slow:  slow.NewMutex(path, zklock.WithTTL(ttl)),
		Fast:  fast.NewMutex(path, zklock.WithTTL(ttl)),
		TTL:   ttl,
		Delay: p.SetLatency,
	})
}
