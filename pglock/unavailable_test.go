package pglock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/pglock"
)

// The tests of this file hold pglock to its behaviour under faults (see
// Faults in the package doc): Lock waits through what heals, TryLock
// answers within its bound, and a lock's row held by another transaction
// is a held lock, not an unavailable database.

// startLock starts l.Lock(ctx) on a goroutine and returns a channel that
// receives its lease and error.
func startLock(ctx context.Context, l dlock.Locker) <-chan lockResult {
	done := make(chan lockResult, 1)
	go func() {
		lease, err := l.Lock(ctx)
		done <- lockResult{lease, err, time.Now()}
	}()
	return done
}

type lockResult struct {
	lease dlock.Lease
	err   error
	at    time.Time
}

// waitFor fails t unless done delivers a lease within d, and returns it.
func waitFor(t *testing.T, done <-chan lockResult, d time.Duration, what string) lockResult {
	t.Helper()
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("Lock %s: %v", what, r.err)
		}
		return r
	case <-time.After(d):
		t.Fatalf("Lock %s: still waiting after %v", what, d)
	}
	return lockResult{}
}

// A lock's row that another transaction holds (SELECT ... FOR UPDATE,
// with the server's default lock_timeout, none) is a held lock: TryLock
// says not obtained, not unavailable, within a second or so (pglock's
// statements wait at most dblease.LockWait for a row's lock); Lock waits,
// and takes the lock once the transaction ends.
func TestIntegrationRowLockedByTransaction(t *testing.T) {
	pg := sharedDB(t)
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			ctx := ctxFor(t, time.Minute)
			name := unique("row-locked")
			l := m.newLocker(newClient(t, pg.URL()), name, pglock.WithTTL(5*time.Second))
			first, err := l.TryLock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			first.Release(ctx)
			tx, err := newPool(t, pg.URL()).Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			if _, err := tx.Exec(ctx, "SELECT FROM dlock_leases WHERE name = $1 FOR UPDATE", name); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			got, err := l.TryLock(ctxFor(t, 10*time.Second))
			took := time.Since(start)
			t.Logf("TryLock of a row another transaction holds: %v after %v", err, took.Round(time.Millisecond))
			if got != nil || !errors.Is(err, dlock.ErrNotObtained) || errors.Is(err, dlock.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("TryLock of a row another transaction holds = %v, %v; want ErrNotObtained (held), not unavailable", got, err)
			}
			if took > 2*time.Second {
				t.Errorf("TryLock of a row another transaction holds took %v; want the lock wait, 1s, and a round trip", took)
			}
			done := startLock(ctx, l)
			time.Sleep(1500 * time.Millisecond) // past a lock wait
			ended := time.Now()
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			r := waitFor(t, done, 5*time.Second, "once the transaction ended")
			t.Logf("Lock granted %v after the transaction ended", r.at.Sub(ended).Round(time.Millisecond))
			r.lease.Release(ctx)
		})
	}
}

// A waiter waits through the server killed with SIGKILL and started again
// (connections refused, then "the database system is starting up" while
// it recovers, 57P03), and is granted the lock once the holder gives it
// back, or its row, which the crash kept, has expired.
func TestIntegrationLockThroughKill(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			pg := startDB(t)
			ctx := ctxFor(t, time.Minute)
			const ttl = 2 * time.Second
			name := unique("killed")
			held, err := m.newLocker(newClient(t, pg.URL()), name, pglock.WithTTL(ttl)).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			done := startLock(ctx, m.newLocker(newClient(t, pg.URL()), name, pglock.WithTTL(ttl)))
			time.Sleep(200 * time.Millisecond) // waiting
			if err := pg.Kill(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Second) // refused
			if err := pg.Restart(); err != nil {
				t.Fatal(err)
			}
			back := time.Now()
			go held.Release(ctx) // its lease may have ended meanwhile
			r := waitFor(t, done, ttl+5*time.Second, "through the kill and the restart")
			defer r.lease.Release(ctx)
			t.Logf("granted %v after the restart", r.at.Sub(back).Round(time.Millisecond))
			if r.lease.Fence() <= held.Fence() {
				t.Errorf("fence %d after %d", r.lease.Fence(), held.Fence())
			}
		})
	}
}

// A waiter whose connections are all reset (the proxy it goes through
// resets them) waits on, and takes the lock when the holder releases it.
func TestIntegrationWaiterConnectionsReset(t *testing.T) {
	pg := sharedDB(t)
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			ctx := ctxFor(t, time.Minute)
			name := unique("reset")
			held, err := m.newLocker(newClient(t, pg.URL()), name).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			proxy := testenv.StartProxy(t, pg.Addr())
			done := startLock(ctx, m.newLocker(newClient(t, via(pg, proxy.Addr(), unique("waiter"))), name))
			for range 5 {
				time.Sleep(100 * time.Millisecond)
				proxy.Reset()
			}
			select {
			case r := <-done:
				t.Fatalf("Lock returned (%v, %v) while the lock was held", r.lease, r.err)
			case <-time.After(100 * time.Millisecond):
			}
			released := time.Now()
			if err := held.Release(ctx); err != nil {
				t.Fatal(err)
			}
			r := waitFor(t, done, time.Second+dlocktest.Slack, "after the release (the fallback poll is 512ms at most)")
			t.Logf("granted %v after the release", r.at.Sub(released).Round(time.Millisecond))
			r.lease.Release(ctx)
		})
	}
}

// A waiter whose listening connection falls silent (its backend stopped
// with SIGSTOP: the connection stays open and carries nothing, as after
// a firewall dropped it) misses the release notice, and takes the lock
// by its fallback poll: DefaultRetry's backoff is 512ms at most.
func TestIntegrationSilentListener(t *testing.T) {
	pg := sharedDB(t)
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			ctx := ctxFor(t, time.Minute)
			app, name := unique("silent"), unique("listener")
			held, err := m.newLocker(newClient(t, pg.URL()), name).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			done := startLock(ctx, m.newLocker(newClient(t, pg.URL()+"&application_name="+app), name))
			var pid int
			for deadline := time.Now().Add(5 * time.Second); pid == 0; time.Sleep(10 * time.Millisecond) {
				if p := admin(t, pg.URL(), "SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN%'", app); len(p) > 0 {
					pid, _ = strconv.Atoi(p[0])
				}
				if time.Now().After(deadline) {
					t.Fatal("the waiter never listened")
				}
			}
			if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			defer syscall.Kill(pid, syscall.SIGCONT)
			time.Sleep(600 * time.Millisecond) // the waiter at its longest poll
			released := time.Now()
			if err := held.Release(ctx); err != nil {
				t.Fatal(err)
			}
			r := waitFor(t, done, 512*time.Millisecond+500*time.Millisecond, "after the release, its notice unheard")
			t.Logf("granted %v after the release, by the fallback poll", r.at.Sub(released).Round(time.Millisecond))
			r.lease.Release(ctx)
		})
	}
}

// A server whose transactions are read-only (default_transaction_read_only
// on: a primary fenced for a switchover) is unavailable until it takes
// writes again: TryLock returns an error matching dlock.ErrUnavailable that
// names the setting, and Lock waits, and is granted once the setting is
// off.
func TestIntegrationReadOnlyServer(t *testing.T) {
	t.Parallel()
	pg := startDB(t)
	set := func(on string) {
		admin(t, pg.URL(), "ALTER SYSTEM SET default_transaction_read_only = "+on)
		admin(t, pg.URL(), "SELECT pg_reload_conf()")
	}
	set("on")
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			ctx := ctxFor(t, time.Minute)
			l := m.newLocker(newClient(t, pg.URL()), unique("read-only"))
			start := time.Now()
			_, err := l.TryLock(ctx)
			if !errors.Is(err, dlock.ErrUnavailable) || errors.Is(err, dlock.ErrNotObtained) || !strings.Contains(err.Error(), "default_transaction_read_only") {
				t.Errorf("TryLock on a read-only server = %v; want ErrUnavailable naming default_transaction_read_only", err)
			}
			if took := time.Since(start); took > time.Second {
				t.Errorf("TryLock on a read-only server took %v; want at once", took)
			}
			_, err = l.Lock(ctxFor(t, time.Second))
			if !errors.Is(err, dlock.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "default_transaction_read_only") {
				t.Errorf("Lock on a read-only server = %v; want ErrUnavailable and DeadlineExceeded, naming default_transaction_read_only", err)
			}
		})
	}
	ctx := ctxFor(t, time.Minute)
	var waiting []<-chan lockResult
	for _, m := range modes {
		waiting = append(waiting, startLock(ctx, m.newLocker(newClient(t, pg.URL()), unique("read-only"))))
	}
	time.Sleep(500 * time.Millisecond)
	set("off")
	for i, done := range waiting {
		r := waitFor(t, done, 5*time.Second, modes[i].name+" mode, once the server takes writes again")
		r.lease.Release(ctx)
	}
}

// closeBound is how long Close may wait for a database that does not
// answer: 1.5s for the releases, then 0.1s for a release still under way
// and 0.1s for the clean-ups (see Faults in the package doc).
const closeBound = 1700 * time.Millisecond

// Close with the database silent, a Client holding leases of both modes
// and a Lock waiting, returns within closeBound (where it took 10s): it
// does not wait for a database that does not answer. The leases end, and
// the Lock returns with ErrNotObtained and ErrClosed.
func TestIntegrationCloseWhileUnreachable(t *testing.T) {
	pg := sharedDB(t)
	proxy := testenv.StartProxy(t, pg.Addr())
	c := newClient(t, via(pg, proxy.Addr(), unique("close")))
	t.Cleanup(func() { proxy.Close() }) // before the pool's Close, which would wait for pgx's cancel requests
	ctx := ctxFor(t, time.Minute)
	var held []dlock.Lease
	for _, m := range modes {
		for range 3 {
			l, err := m.newLocker(c, unique("close"), pglock.WithTTL(3*time.Second)).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, l)
		}
	}
	done := startLock(ctx, modes[0].newLocker(c, held[0].Key()))
	time.Sleep(100 * time.Millisecond)
	proxy.Blackhole(true)
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	err := c.Close()
	took := time.Since(start)
	t.Logf("Close with the database silent took %v: %v", took.Round(time.Millisecond), err)
	if took > closeBound+dlocktest.Slack {
		t.Errorf("Close with the database silent took %v; want within %v", took, closeBound)
	}
	select {
	case r := <-done:
		if !errors.Is(r.err, dlock.ErrNotObtained) || !errors.Is(r.err, pglock.ErrClosed) {
			t.Errorf("Lock ended by Close = %v, %v; want ErrNotObtained and ErrClosed", r.lease, r.err)
		}
	case <-time.After(time.Second):
		t.Fatal("Lock still waiting after Close returned")
	}
	for _, l := range held {
		select {
		case <-l.Done():
		case <-time.After(time.Until(l.Until()) + dlocktest.Slack):
			t.Fatalf("lease %q still open at its Until after Close", l.Key())
		}
	}
}

// What waiting does not heal fails Lock at once, in both modes, with an
// error that says what to fix and does not match dlock.ErrUnavailable: a
// role that does not exist (28000), a database that does not exist
// (3D000), a table never migrated (42P01).
func TestIntegrationLockFailsAtOnce(t *testing.T) {
	pg := sharedDB(t)
	base := strings.TrimSuffix(strings.TrimPrefix(pg.URL(), "postgres://"+testenv.PostgresUser+"@"), "/postgres?sslmode=disable")
	for _, tc := range []struct {
		what, url, want string
		opts            []pglock.ClientOption
	}{
		{"unknown role", "postgres://dlock_nosuch@" + base + "/postgres?sslmode=disable", "28000", nil},
		{"unknown database", "postgres://" + testenv.PostgresUser + "@" + base + "/dlock_nosuch?sslmode=disable", "3D000", nil},
		{"never migrated", pg.URL(), "call Client.Migrate", []pglock.ClientOption{pglock.WithTable(unique("never_migrated"))}},
	} {
		for _, m := range modes {
			c := newClient(t, tc.url, tc.opts...)
			start := time.Now()
			_, err := m.newLocker(c, "x").Lock(ctxFor(t, 30*time.Second))
			took := time.Since(start)
			if err == nil || !strings.Contains(err.Error(), tc.want) || errors.Is(err, dlock.ErrUnavailable) || errors.Is(err, dlock.ErrNotObtained) {
				t.Errorf("%s, %s mode: Lock = %v; want an error containing %q, neither unavailable nor not obtained", tc.what, m.name, err, tc.want)
			}
			if took > 2*time.Second {
				t.Errorf("%s, %s mode: Lock failed after %v; want at once", tc.what, m.name, took)
			}
		}
	}
}
