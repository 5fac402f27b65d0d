package pglock_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/pglock"
)

// Close waits for the clean-ups of interrupted calls: once it returns,
// nothing that a failed attempt or a release took remains held, even
// when the process would exit at once, as the dlock command does.
//
// An attempt whose context runs out while its statement is on its way
// (the proxy delays it) is freed after the statement lands, even when
// the clean-up's first look comes long before that; a release
// whose statement is lost (the proxy drops it) is made again once the
// database can be reached, within Close's wait.
func TestIntegrationCloseFinishesCleanups(t *testing.T) {
	const latency = 150 * time.Millisecond
	for _, m := range modes {
		for _, late := range []bool{false, true} {
			sub := "/attempt"
			if late {
				sub = "/attempt-lands-late"
			}
			t.Run(m.name+sub, func(t *testing.T) {
				t.Parallel() // independent of the others: names (and proxy, or server) of its own
				pg := sharedDB(t)
				proxy := testenv.StartProxy(t, pg.Addr())
				name := unique("close-attempt")
				pool := newPool(t, via(pg, proxy.Addr(), unique("close")))
				c := pglock.New(pool)
				t.Cleanup(func() { c.Close() })
				// The attempt must find a connection in the pool that has
				// run its statements before: it sends them at once.
				warm(t, c, m)
				for deadline := time.Now().Add(5 * time.Second); pool.Stat().IdleConns() == 0; time.Sleep(time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatal("the pool keeps no idle connection")
					}
				}
				delay := latency
				if late {
					delay = 3 * latency
				}
				proxy.SetLatency(delay)
				// pgx sends a cancel request when the context runs out,
				// on a connection of its own, which the proxy refuses:
				// the statement runs to the end, as when the request
				// comes too late or the database cannot be reached.
				proxy.SetRefuse(true)
				short := ctxFor(t, latency/3)
				if lease, err := m.newLocker(c, name, pglock.WithTTL(time.Minute)).TryLock(short); !errors.Is(err, dlock.ErrNotObtained) {
					t.Fatalf("TryLock with a context shorter than the latency: fence %v, %v; want ErrNotObtained", fenceOf(lease), err)
				}
				proxy.SetRefuse(false)
				if late {
					// The clean-up looks at once, on a fast connection,
					// long before the attempt lands: it must wait for it.
					proxy.SetLatency(0)
				}
				closeAndCheck(t, c, pg, m, name, 3*delay)
				if fence := admin(t, pg.URL(), "SELECT fence FROM dlock_leases WHERE name = $1", name); len(fence) != 1 || fence[0] == "0" {
					t.Errorf("the interrupted attempt did not take the lock (fence %v): the test proves nothing", fence)
				}
			})
		}
		t.Run(m.name+"/release", func(t *testing.T) {
			pg := sharedDB(t)
			proxy := testenv.StartProxy(t, pg.Addr())
			name := unique("close-release")
			c := pglock.New(newPool(t, via(pg, proxy.Addr(), unique("close"))))
			t.Cleanup(func() { c.Close() })
			ctx := ctxFor(t, time.Minute)
			lease, err := m.newLocker(c, name, pglock.WithTTL(time.Minute)).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			proxy.Blackhole(true)
			if err := lease.Release(ctxFor(t, 50*time.Millisecond)); err == nil {
				t.Fatal("Release through a blackhole returned nil")
			}
			go func() { // the database comes back while Close waits
				time.Sleep(300 * time.Millisecond)
				proxy.Blackhole(false)
			}()
			closeAndCheck(t, c, pg, m, name, 0)
			proxy.Reset() // pgx's cancel request of the dropped release waits 15s for a reply
		})
	}
}

// warm makes c take and release a lock in mode m, which leaves a
// connection in the pool that has prepared m's statements.
func warm(t *testing.T, c *pglock.Client, m mode) {
	t.Helper()
	ctx := ctxFor(t, 10*time.Second)
	lease, err := m.newLocker(c, unique("warm")).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// closeAndCheck closes c, and then, after settle (for what was on its way
// to land), fails t if lock name is still held in any way.
func closeAndCheck(t *testing.T, c *pglock.Client, pg *testenv.Postgres, m mode, name string, settle time.Duration) {
	t.Helper()
	start := time.Now()
	err := c.Close()
	took := time.Since(start)
	time.Sleep(settle)
	left := m.leftovers(t, pg.URL(), name)
	t.Logf("Close took %v (%v); left: %v", took, err, left)
	if len(left) > 0 {
		t.Errorf("after Close returned (in %v: %v): %s", took, err, fmt.Sprint(left))
	}
}
