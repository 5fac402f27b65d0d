package pglock_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/pglock"
)

// via returns the connection string of pg with the address replaced by
// addr (a proxy's) and the application name set to app.
func via(pg *testenv.Postgres, addr, app string) string {
	return strings.Replace(pg.URL(), pg.Addr(), addr, 1) + "&application_name=" + app
}

// terminate ends, with pg_terminate_backend, every session of pg whose
// application name is app, and returns how many it ended.
func terminate(t testing.TB, pg *testenv.Postgres, app string) int {
	t.Helper()
	return len(admin(t, pg.URL(), "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", app))
}

// A holder whose connections the database terminates, and which cannot
// connect again, loses its lock: in session mode at once, since it hears
// its session end; in lease mode by its Until, when its renewals have
// failed. Either way the next holder gets the lock only when the row
// expires in the database, and its fence is higher.
func TestIntegrationTerminatedHolder(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			ttl := time.Second
			name := unique("cut-off")
			proxy := testenv.StartProxy(t, sharedDB(t).Addr())
			app := unique("holder")
			holder := m.newLocker(newClient(t, via(sharedDB(t), proxy.Addr(), app)), name, pglock.WithTTL(ttl))
			next := m.newLocker(newClient(t, sharedDB(t).URL()), name, pglock.WithTTL(ttl))
			ctx := ctxFor(t, time.Minute)
			lease, err := holder.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			proxy.SetRefuse(true)
			killed := time.Now()
			if n := terminate(t, sharedDB(t), app); n == 0 {
				t.Fatal("no session of the holder to terminate")
			}
			// By Until, that is, allowing for the machine's late timers: a
			// loaded one closed Done 200ms after Until. A renewal already
			// running may still have moved Until, so Done is given two TTLs.
			closed := dlocktest.WaitDoneByUntil(t, lease, 2*ttl, "the holder's sessions were terminated")
			if err := lease.Err(); !errors.Is(err, dlock.ErrLost) {
				t.Errorf("Err = %v; want ErrLost", err)
			}
			t.Logf("%s mode: Done closed %v after the termination: %v", m.name, closed.Sub(killed), lease.Err())
			if m.name == "session" {
				if took := closed.Sub(killed); took > 500*time.Millisecond || !errors.Is(lease.Err(), pglock.ErrSessionLost) {
					t.Errorf("session mode: Done closed after %v with %v; want at once, with ErrSessionLost", took, lease.Err())
				}
			}
			second, err := next.Lock(ctxFor(t, 2*ttl))
			if err != nil {
				t.Fatalf("Lock after the holder was cut off: %v", err)
			}
			defer second.Release(ctx)
			if time.Since(killed) < ttl/2 {
				t.Errorf("the next holder got the lock %v after the termination; the lease's TTL is %v", time.Since(killed), ttl)
			}
			if second.Fence() <= lease.Fence() {
				t.Errorf("fence %d after %d", second.Fence(), lease.Fence())
			}
		})
	}
}

// A waiter whose release notices stop (its listening connection is
// terminated) still gets the lock soon after the release, by its
// fallback poll and the reconnected listener.
func TestIntegrationListenerTerminated(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			app, name := unique("waiter"), unique("listener")
			holder := m.newLocker(newClient(t, sharedDB(t).URL()), name)
			waiter := m.newLocker(newClient(t, sharedDB(t).URL()+"&application_name="+app), name)
			ctx := ctxFor(t, time.Minute)
			first, err := holder.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan error, 1)
			go func() {
				l, err := waiter.Lock(ctx)
				if err == nil {
					defer l.Release(ctx)
				}
				got <- err
			}()
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				if n := len(admin(t, sharedDB(t).URL(), "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN%'", app)); n > 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the waiter never listened")
				}
			}
			released := time.Now()
			if err := first.Release(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-got:
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("%s mode: the waiter got the lock %v after the release", m.name, time.Since(released))
			case <-time.After(time.Second + dlocktest.Slack):
				t.Fatal("the waiter did not get the lock within a second of the release (the fallback poll is 512ms at most)")
			}
		})
	}
}

// A holder cut off from the database without a word (its traffic dropped,
// its connections left open) loses its lock before anyone else can take
// it: its Done closes by Until, when its renewals have failed; the
// database frees the lock when the lease expires (lease mode), or ends the
// silent session after the TTL (session mode, idle_session_timeout),
// and only then does the next holder get it.
func TestIntegrationSilentHolder(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			ttl := time.Second
			name := unique("cut-off")
			proxy := testenv.StartProxy(t, sharedDB(t).Addr())
			holder := m.newLocker(newClient(t, via(sharedDB(t), proxy.Addr(), unique("silent"))), name, pglock.WithTTL(ttl))
			next := m.newLocker(newClient(t, sharedDB(t).URL()), name, pglock.WithTTL(ttl))
			ctx := ctxFor(t, time.Minute)
			lease, err := holder.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(ttl / 2) // a renewal or two
			proxy.Blackhole(true)
			defer proxy.Reset() // so that the clients close at once
			cut := time.Now()
			second, err := next.Lock(ctxFor(t, 3*ttl))
			if err != nil {
				t.Fatalf("Lock after the holder fell silent: %v", err)
			}
			obtained := time.Now()
			defer second.Release(ctx)
			if until := lease.Until(); obtained.Before(until) {
				t.Fatalf("the next holder got the lock %v after the cut while the silent holder's lease was valid until %v later",
					obtained.Sub(cut), until.Sub(obtained))
			}
			// Done closes at Until, on a timer that a loaded machine may
			// run a little late: the grant can come first.
			waitClosed(t, lease, dlocktest.Slack, "after the next holder's grant")
			if err := lease.Err(); !errors.Is(err, dlock.ErrLost) {
				t.Errorf("Err = %v; want ErrLost", err)
			}
			t.Logf("%s mode: the next holder got the lock %v after the cut; the silent holder ended with %v", m.name, obtained.Sub(cut), lease.Err())
			if second.Fence() <= lease.Fence() {
				t.Errorf("fence %d after %d", second.Fence(), lease.Fence())
			}
		})
	}
}

// A session-mode holder whose session the database terminated, and which
// has not heard of it yet (the FATAL message is still on its way), is
// told by Release that it did not hold the lock any more: the database
// freed it when it ended the session. The proxy's latency keeps the
// message from the holder until Release reads it as its reply. The
// release still frees the lock's row, which would otherwise stay held for
// its TTL: the holder is done with it.
func TestIntegrationReleaseOfTerminatedSession(t *testing.T) {
	const latency = 300 * time.Millisecond
	proxy := testenv.StartProxy(t, sharedDB(t).Addr())
	app, name := unique("terminated"), unique("terminated")
	c := newClient(t, via(sharedDB(t), proxy.Addr(), app))
	ctx := ctxFor(t, time.Minute)
	lease, err := c.NewSessionMutex(name, pglock.WithTTL(time.Minute), pglock.WithoutRenewal()).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	proxy.SetLatency(latency)
	if n := terminate(t, sharedDB(t), app); n == 0 {
		t.Fatal("no session of the holder to terminate")
	}
	for deadline := time.Now().Add(latency / 2); ; time.Sleep(5 * time.Millisecond) {
		if len(admin(t, sharedDB(t).URL(), "SELECT pid FROM pg_stat_activity WHERE application_name = $1", app)) == 0 {
			break // the session, and with it the lock, is gone
		}
		if time.Now().After(deadline) {
			t.Fatalf("the terminated session was still there after %v", latency/2)
		}
	}
	if lease.Err() != nil {
		t.Fatalf("the holder heard of the termination within %v, through a proxy with %v latency: %v", latency/2, latency, lease.Err())
	}
	err = lease.Release(ctx)
	if !errors.Is(err, dlock.ErrNotHeld) || !errors.Is(err, dlock.ErrLost) || !errors.Is(err, pglock.ErrSessionLost) {
		t.Errorf("Release of a terminated session = %v; want ErrNotHeld, ErrLost and ErrSessionLost", err)
	}
	if !errors.Is(lease.Err(), pglock.ErrSessionLost) {
		t.Errorf("Err = %v; want ErrSessionLost", lease.Err())
	}
	next, err := newClient(t, sharedDB(t).URL()).NewSessionMutex(name).Lock(ctxFor(t, 20*time.Second))
	if err != nil {
		t.Fatalf("Lock after the release of a terminated session (its row's TTL is a minute): %v", err)
	}
	next.Release(ctx)
}

// An acquire that takes longer than the TTL is no lease, in either mode:
// every attempt is refused with ErrNotObtained saying so (in session mode
// it used to build a lease whose Until had passed, whose expiry could run
// its clean-up before the lease was made, and panic), and nothing stays
// held: with the latency gone, another client takes the lock at once.
func TestIntegrationAcquireSlowerThanTTL(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel() // independent of the others: names (and proxy, or server) of its own
			ctx := ctxFor(t, time.Minute)
			name := unique("slow")
			proxy := testenv.StartProxy(t, sharedDB(t).Addr())
			c := newClient(t, via(sharedDB(t), proxy.Addr(), unique("slow")))
			slow := m.newLocker(c, name, pglock.WithTTL(pglock.MinTTL))
			// Connections open before the latency, by a lock whose TTL a
			// loaded machine cannot outlast (a 10ms one could, and fail).
			warm, err := m.newLocker(c, unique("warm"), pglock.WithTTL(10*time.Second)).TryLock(ctx)
			if err != nil {
				t.Fatalf("TryLock without latency: %v", err)
			}
			warm.Release(ctx)
			proxy.SetLatency(20 * time.Millisecond) // each way: every statement outlives the 10ms TTL
			for range 20 {
				l, err := slow.TryLock(ctx)
				if err == nil {
					t.Fatalf("TryLock slower than the TTL = a lease until %v (now %v)", l.Until(), time.Now())
				}
				if !errors.Is(err, dlock.ErrNotObtained) || !strings.Contains(err.Error(), "longer than the TTL") {
					t.Fatalf("TryLock slower than the TTL = %v; want ErrNotObtained saying it took longer than the TTL", err)
				}
			}
			proxy.SetLatency(0)
			other := m.newLocker(newClient(t, sharedDB(t).URL()), name, pglock.WithTTL(time.Second))
			l, err := other.Lock(ctxFor(t, 5*time.Second))
			if err != nil {
				t.Fatalf("another client after the slow attempts: %v", err)
			}
			l.Release(ctx)
		})
	}
}

// A Release whose connection the database has terminated (the pool does
// not know yet) frees the row in the background, as its error says: the
// next holder gets the lock at once, not when the row expires (it used to
// wait the whole TTL: the FATAL reply was taken for a statement that ran).
func TestIntegrationReleaseOnTerminatedConnection(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	app := unique("victim")
	url := via(sharedDB(t), sharedDB(t).Addr(), app)
	pool := newPool(t, url)
	c := pglock.New(pool)
	t.Cleanup(func() { c.Close() })
	name := unique("terminated-release")
	const ttl = 5 * time.Second
	l, err := c.NewMutex(name, pglock.WithTTL(ttl)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := terminate(t, sharedDB(t), app); n == 0 {
		t.Fatal("no session of the holder to terminate")
	}
	time.Sleep(100 * time.Millisecond) // the backends are gone; the pool's connections still look open
	released := time.Now()
	l.Release(ctx) // may fail: the error says the row is freed in the background
	next, err := pglock.New(newPool(t, sharedDB(t).URL())).NewMutex(name, pglock.WithTTL(ttl)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Release(ctx)
	if took := time.Since(released); took > ttl/2 {
		t.Errorf("the next holder got the lock %v after the Release (TTL %v); want it freed at once", took, ttl)
	}
}

// waitClosed fails t unless lease's Done is closed within d of its Until
// (or of now, if later).
func waitClosed(t *testing.T, lease dlock.Lease, d time.Duration, what string) {
	t.Helper()
	select {
	case <-lease.Done():
	case <-time.After(max(time.Until(lease.Until()), 0) + d):
		t.Fatalf("Done not closed %v past the lease's Until, %s", d, what)
	}
}
