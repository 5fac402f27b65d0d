package mysqllock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/mysqllock"
)

// The tests of this file hold mysqllock to its behaviour under faults
// (see Faults in the package doc): Lock waits through what heals, TryLock
// answers within its bound, and a lock's row held by another transaction
// is a held lock, not an unavailable database.

type lockResult struct {
	lease dlock.Lease
	err   error
	at    time.Time
}

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
// with the server's default innodb_lock_wait_timeout, 50s) is a held
// lock: TryLock says not obtained, not unavailable, within a second or so
// (mysqllock's statements wait at most dblease.LockWait for a row's
// lock), where it took three lock waits, 150s; Lock waits, and takes the
// lock once the transaction ends.
func TestIntegrationRowLockedByTransaction(t *testing.T) {
	srv := sharedDB(t)
	for _, md := range modes {
		t.Run(md.name, func(t *testing.T) {
			ctx := ctxFor(t, time.Minute)
			name := unique("row-locked")
			l := md.newLocker(newClient(t, srv.DSN()), name, mysqllock.WithTTL(5*time.Second))
			first, err := l.TryLock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			first.Release(ctx)
			tx, err := openDB(t, srv.RootDSN()).BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			if _, err := tx.ExecContext(ctx, "SELECT token FROM dlock_leases WHERE name = ? FOR UPDATE", name); err != nil {
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
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			r := waitFor(t, done, 5*time.Second, "once the transaction ended")
			t.Logf("Lock granted %v after the transaction ended", r.at.Sub(ended).Round(time.Millisecond))
			r.lease.Release(ctx)
		})
	}
}

// A waiter waits through the server killed with SIGKILL and started again
// (connections refused, reset, then a server recovering), and is granted
// the lock once the holder gives it back, or its row, which the crash
// kept, has expired.
func TestIntegrationLockThroughKill(t *testing.T) {
	for _, md := range modes {
		t.Run(md.name, func(t *testing.T) {
			t.Parallel()
			srv := startDB(t)
			ctx := ctxFor(t, time.Minute)
			const ttl = 2 * time.Second
			name := unique("killed")
			held, err := md.newLocker(newClient(t, srv.DSN()), name, mysqllock.WithTTL(ttl)).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			done := startLock(ctx, md.newLocker(newClient(t, srv.DSN()), name, mysqllock.WithTTL(ttl)))
			time.Sleep(200 * time.Millisecond) // waiting
			if err := srv.Kill(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Second) // refused
			if err := srv.Restart(); err != nil {
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
// resets them: in session mode, the one waiting in GET_LOCK on the
// server) waits on, and takes the lock when the holder releases it.
func TestIntegrationWaiterConnectionsReset(t *testing.T) {
	srv := sharedDB(t)
	for _, md := range modes {
		t.Run(md.name, func(t *testing.T) {
			ctx := ctxFor(t, time.Minute)
			name := unique("reset")
			held, err := md.newLocker(newClient(t, srv.DSN()), name).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			proxy := testenv.StartProxy(t, srv.Addr())
			done := startLock(ctx, md.newLocker(newClient(t, strings.Replace(srv.DSN(), srv.Addr(), proxy.Addr(), 1)), name))
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
			r := waitFor(t, done, time.Second, "after the release (the poll is 64ms at most)")
			t.Logf("granted %v after the release", r.at.Sub(released).Round(time.Millisecond))
			r.lease.Release(ctx)
		})
	}
}

// A read-only server (read_only: a primary fenced for a switchover, or a
// replica) is unavailable until it takes writes again: TryLock returns an
// error matching dlock.ErrUnavailable that names the setting, and Lock
// waits, and is granted once it is off.
func TestIntegrationReadOnlyServer(t *testing.T) {
	t.Parallel()
	srv := startDB(t)
	admin(t, srv, "SET GLOBAL read_only = 1")
	for _, md := range modes {
		t.Run(md.name, func(t *testing.T) {
			ctx := ctxFor(t, time.Minute)
			l := md.newLocker(newClient(t, srv.DSN()), unique("read-only"))
			start := time.Now()
			_, err := l.TryLock(ctx)
			if !errors.Is(err, dlock.ErrUnavailable) || errors.Is(err, dlock.ErrNotObtained) || !strings.Contains(err.Error(), "read_only") {
				t.Errorf("TryLock on a read-only server = %v; want ErrUnavailable naming read_only", err)
			}
			if took := time.Since(start); took > time.Second {
				t.Errorf("TryLock on a read-only server took %v; want at once", took)
			}
			_, err = l.Lock(ctxFor(t, time.Second))
			if !errors.Is(err, dlock.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "read_only") {
				t.Errorf("Lock on a read-only server = %v; want ErrUnavailable and DeadlineExceeded, naming read_only", err)
			}
		})
	}
	ctx := ctxFor(t, time.Minute)
	var waiting []<-chan lockResult
	for _, md := range modes {
		waiting = append(waiting, startLock(ctx, md.newLocker(newClient(t, srv.DSN()), unique("read-only"))))
	}
	time.Sleep(500 * time.Millisecond)
	admin(t, srv, "SET GLOBAL read_only = 0")
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
	srv := sharedDB(t)
	proxy := testenv.StartProxy(t, srv.Addr())
	c := newClient(t, strings.Replace(srv.DSN(), srv.Addr(), proxy.Addr(), 1))
	t.Cleanup(func() { proxy.Close() })
	ctx := ctxFor(t, time.Minute)
	var held []dlock.Lease
	for _, m := range modes {
		for range 3 {
			l, err := m.newLocker(c, unique("close"), mysqllock.WithTTL(3*time.Second)).Lock(ctx)
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
		if !errors.Is(r.err, dlock.ErrNotObtained) || !errors.Is(r.err, mysqllock.ErrClosed) {
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
