package pglock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/pglock"
)

// A holder whose session the database ends while the holder cannot hear
// it (its traffic dropped, as with a dead host) keeps its lock until its
// Until: the next holder is granted the lock only after that, in either
// mode. The same holds when the database is killed and restarted. Until
// is the holder's promise; the successor must not break it, whatever the
// holder heard.
func TestIntegrationSessionEndUnheard(t *testing.T) {
	faults := []struct {
		name  string
		own   bool // the fault needs a cluster of its own
		fault func(t *testing.T, pg *testenv.Postgres, app string)
	}{
		{"terminated", false, func(t *testing.T, pg *testenv.Postgres, app string) {
			if n := terminate(t, pg, app); n == 0 {
				t.Fatal("no session of the holder to terminate")
			}
		}},
		{"killed", true, func(t *testing.T, pg *testenv.Postgres, app string) {
			if err := pg.Kill(); err != nil {
				t.Fatal(err)
			}
			if err := pg.Restart(); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, f := range faults {
		for _, m := range modes {
			t.Run(f.name+"/"+m.name, func(t *testing.T) {
				t.Parallel() // independent of the others: names (and proxy, or server) of its own
				pg := sharedDB(t)
				if f.own {
					pg = startDB(t)
				}
				const ttl = 2 * time.Second
				proxy := testenv.StartProxy(t, pg.Addr())
				app, name := unique("unheard"), unique("unheard")
				ctx := ctxFor(t, time.Minute)
				lease, err := m.newLocker(newClient(t, via(pg, proxy.Addr(), app)), name, pglock.WithTTL(ttl)).Lock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				time.Sleep(ttl / 2) // a renewal or two
				proxy.Blackhole(true)
				defer proxy.Reset() // so that the holder's client closes at once
				f.fault(t, pg, app)
				faulted, until := time.Now(), lease.Until()
				next := m.newLocker(newClient(t, pg.URL()), name, pglock.WithTTL(ttl))
				second, err := next.Lock(ctxFor(t, 3*ttl))
				if err != nil {
					t.Fatalf("Lock after the holder's session ended: %v", err)
				}
				obtained := time.Now()
				defer second.Release(ctx)
				if obtained.Before(until) {
					t.Errorf("the next holder got the lock %v after the fault, %v before the holder's Until (holder: %v)",
						obtained.Sub(faulted), until.Sub(obtained), lease.Err())
				}
				if second.Fence() <= lease.Fence() {
					t.Errorf("fence %d after %d", second.Fence(), lease.Fence())
				}
				t.Logf("the next holder got the lock %v after the fault, %v after the holder's Until; the holder: %v",
					obtained.Sub(faulted), obtained.Sub(until), lease.Err())
			})
		}
	}
}

// One name is one lock, whichever mode takes it: a Mutex and a
// SessionMutex of the same name exclude each other, both ways, and once
// one is released the other is granted it with a higher fence.
func TestIntegrationModesShareName(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	for _, order := range [][2]mode{{leaseMode, sessionMode}, {sessionMode, leaseMode}} {
		t.Run(order[0].name+"-then-"+order[1].name, func(t *testing.T) {
			name := unique("one-name")
			first, err := order[0].newLocker(newClient(t, sharedDB(t).URL()), name).TryLock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			other := order[1].newLocker(newClient(t, sharedDB(t).URL()), name)
			if second, err := other.TryLock(ctx); !errors.Is(err, dlock.ErrNotObtained) {
				t.Errorf("%s mode took %q while %s mode held it (fences %d and %v): %v",
					order[1].name, name, order[0].name, first.Fence(), fenceOf(second), err)
				if second != nil {
					second.Release(ctx)
				}
			}
			if err := first.Release(ctx); err != nil {
				t.Fatal(err)
			}
			second, err := other.TryLock(ctx)
			if err != nil {
				t.Fatalf("%s mode after the %s-mode holder released: %v", order[1].name, order[0].name, err)
			}
			defer second.Release(ctx)
			if second.Fence() <= first.Fence() {
				t.Errorf("fence %d after %d", second.Fence(), first.Fence())
			}
		})
	}
}

// fenceOf returns l's fence, or nil if there is no lease.
func fenceOf(l dlock.Lease) any {
	if l == nil {
		return nil
	}
	return l.Fence()
}
