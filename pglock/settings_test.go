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
	"github.com/dlock-go/dlock/internal/dblease/dbleasetest"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/pglock"
)

// With default_transaction_isolation at REPEATABLE READ or SERIALIZABLE,
// contended locks and elections never return a serialization failure
// (40001) or any other error to the caller, and never overlap.
func TestIntegrationIsolationLevels(t *testing.T) {
	pg := sharedDB(t)
	const d = time.Second
	for _, level := range []string{"repeatable read", "serializable"} {
		t.Run(strings.ReplaceAll(level, " ", "-"), func(t *testing.T) {
			db := sharedWith(pg, "&default_transaction_isolation="+strings.ReplaceAll(level, " ", "%20"))
			for i, m := range db.Modes {
				t.Run(m, func(t *testing.T) { dbleasetest.Contend(t, db, i, d) })
			}
			t.Run("election", func(t *testing.T) { dbleasetest.Campaign(t, db, d) })
		})
	}
}

// With default_transaction_read_only on, pglock writes nothing: Migrate
// and WriteFenced fail at once, and TryLock returns an error matching
// dlock.ErrUnavailable, all naming the setting; Lock and Campaign wait, as
// for a server fenced for a switchover, until their ctx ends, and then say
// so too.
func TestIntegrationReadOnlyDefault(t *testing.T) {
	pg := sharedDB(t)
	url := pg.URL() + "&default_transaction_read_only=on"
	c := newClient(t, url, pglock.WithTable(unique("read_only")))
	ctx := ctxFor(t, 30*time.Second)
	check := func(what string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "default_transaction_read_only") {
			t.Errorf("%s: %v; want an error naming default_transaction_read_only", what, err)
		}
	}
	check("Migrate", c.Migrate(ctx))
	c = newClient(t, url)
	for _, m := range modes {
		l := m.newLocker(c, unique("read-only"))
		_, err := l.TryLock(ctx)
		check(m.name+" TryLock", err)
		if !errors.Is(err, dlock.ErrUnavailable) || errors.Is(err, dlock.ErrNotObtained) {
			t.Errorf("%s TryLock: %v; want ErrUnavailable, not ErrNotObtained", m.name, err)
		}
		_, err = l.Lock(ctxFor(t, 500*time.Millisecond))
		check(m.name+" Lock", err)
		if !errors.Is(err, dlock.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s Lock: %v; want ErrUnavailable once its ctx ended", m.name, err)
		}
	}
	_, err := c.NewElection(unique("read-only")).Campaign(ctxFor(t, 500*time.Millisecond), "v")
	check("Campaign", err)
	check("WriteFenced", c.WriteFenced(ctx, unique("read-only"), 1, noop))
}

// With idle_in_transaction_session_timeout, which ends a session that
// waits between two statements of a transaction, every call works, even
// when each round trip takes far longer than the timeout: pglock never
// leaves a transaction open between round trips. WriteFenced's
// transaction spans the caller's statements, so it is checked only where
// the round trips are far shorter than the timeout (1s).
func TestIntegrationIdleInTransactionTimeout(t *testing.T) {
	pg := sharedDB(t)
	t.Run("fast", func(t *testing.T) {
		idleInTransaction(t, pg.URL()+"&idle_in_transaction_session_timeout=1000", true)
	})
	t.Run("slow", func(t *testing.T) {
		proxy := testenv.StartProxy(t, pg.Addr())
		proxy.SetLatency(20 * time.Millisecond)
		idleInTransaction(t, via(pg, proxy.Addr(), "idle-tx")+"&idle_in_transaction_session_timeout=10", false)
	})
}

func idleInTransaction(t *testing.T, url string, fenced bool) {
	ctx := ctxFor(t, time.Minute)
	for range 3 {
		c := newClient(t, url, pglock.WithTable(unique("idle_tx")))
		if err := c.Migrate(ctx); err != nil {
			t.Fatalf("Migrate: %v", err)
		}
	}
	c := newClient(t, url)
	for _, m := range modes {
		for range 5 {
			l, err := m.newLocker(c, unique("idle-tx"), pglock.WithTTL(5*time.Second)).Lock(ctx)
			if err != nil {
				t.Fatalf("%s Lock: %v", m.name, err)
			}
			if err := l.Refresh(ctx); err != nil {
				t.Errorf("%s Refresh: %v", m.name, err)
			}
			if fenced {
				if err := c.WriteFenced(ctx, unique("idle-tx"), l.Fence(), noop); err != nil {
					t.Errorf("%s WriteFenced: %v", m.name, err)
				}
			}
			if err := l.Release(ctx); err != nil {
				t.Errorf("%s Release: %v", m.name, err)
			}
		}
	}
	e := c.NewElection(unique("idle-tx"))
	if _, err := e.Campaign(ctx, "v"); err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	if ld, err := e.Leader(ctx); err != nil || ld.Value != "v" {
		t.Errorf("Leader = %+v, %v; want v", ld, err)
	}
	if err := e.Resign(ctx); err != nil {
		t.Errorf("Resign: %v", err)
	}
}

// A lock's row held by another transaction past lock_timeout (55P03, as
// a serialization failure or a deadlock, is transient): TryLock says not
// obtained, and Lock waits through it and takes the lock once the
// transaction ends.
func TestIntegrationLockTimeout(t *testing.T) {
	pg := sharedDB(t)
	ctx := ctxFor(t, time.Minute)
	name := unique("row-locked")
	c := newClient(t, pg.URL()+"&lock_timeout=200")
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			l := m.newLocker(c, name, pglock.WithTTL(5*time.Second))
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
			if got, err := l.TryLock(ctx); got != nil || !errors.Is(err, dlock.ErrNotObtained) {
				t.Errorf("TryLock of a row locked past lock_timeout: %v, %v; want ErrNotObtained", got, err)
			}
			done := make(chan error, 1)
			go func() {
				got, err := l.Lock(ctx)
				if err == nil {
					err = got.Release(ctx)
				}
				done <- err
			}()
			time.Sleep(500 * time.Millisecond) // past a lock timeout
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Errorf("Lock through lock timeouts: %v; want the lock", err)
			}
		})
	}
}

// With synchronous_commit off (here server-wide), a crash loses the
// commits of the last few wal_writer_delay; a crash of one backend is
// enough, and the postmaster recovers from it without restarting, so
// that neither restart detection nor WithRestartWindow sees it. pglock's
// commits are flushed all the same: the holder's row survives the crash,
// and no one else is granted the lock before the holder's Until.
func TestIntegrationSynchronousCommitOff(t *testing.T) {
	t.Parallel() // a server of its own, which crashes
	pg := startDB(t)
	admin(t, pg.URL(), "ALTER SYSTEM SET synchronous_commit = off")
	// Long enough that the WAL writer does not write the grant out
	// before the crash.
	admin(t, pg.URL(), "ALTER SYSTEM SET wal_writer_delay = '10s'")
	admin(t, pg.URL(), "SELECT pg_reload_conf()")
	const ttl = 3 * time.Second
	for _, tc := range []struct {
		name string
		m    mode
		opts []pglock.ClientOption
	}{
		{"lease/default", leaseMode, nil},
		{"session/window", sessionMode, []pglock.ClientOption{pglock.WithRestartWindow(ttl)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxFor(t, time.Minute)
			name := unique("async")
			held, err := tc.m.newLocker(newClient(t, pg.URL(), tc.opts...), name, pglock.WithTTL(ttl)).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			crashBackend(t, pg)
			crashed := time.Now()
			next := tc.m.newLocker(newClient(t, pg.URL(), tc.opts...), name, pglock.WithTTL(ttl))
			for {
				got, err := next.TryLock(ctx)
				if got != nil {
					if time.Now().Before(held.Until()) {
						t.Errorf("a second holder was granted the lock %v after the crash, %v before the first one's Until",
							time.Since(crashed), time.Until(held.Until()))
					}
					got.Release(ctx)
					return
				}
				if errors.Is(err, dlock.ErrNotObtained) || ctx.Err() != nil {
					return // refused, once the server answered again
				}
				time.Sleep(20 * time.Millisecond) // the server is recovering
			}
		})
	}
}

// crashBackend kills one backend of pg with SIGKILL: the postmaster ends
// every other backend and recovers from the WAL on disk, without
// restarting.
func crashBackend(t *testing.T, pg *testenv.Postgres) {
	t.Helper()
	pid, err := strconv.Atoi(admin(t, pg.URL(), "SELECT pg_backend_pid()")[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
}

// With statement_timeout shorter than pglock's lock wait (a second), a
// lock whose row another transaction holds is still a held lock: TryLock
// returns an error matching dlock.ErrNotObtained, not dlock.ErrUnavailable
// (it returned "unavailable: canceling statement due to statement timeout
// (57014)" after 300ms before the lock wait was made shorter than the
// statement timeout), and Lock takes the lock once the transaction ends.
func TestIntegrationStatementTimeoutBelowLockWait(t *testing.T) {
	pg := sharedDB(t)
	url := pg.URL() + "&statement_timeout=300"
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			ctx := ctxFor(t, time.Minute)
			name := unique("statement-timeout")
			l := m.newLocker(newClient(t, url), name, pglock.WithTTL(5*time.Second))
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
			got, err := l.TryLock(ctxFor(t, 10*time.Second))
			if got != nil || !errors.Is(err, dlock.ErrNotObtained) || errors.Is(err, dlock.ErrUnavailable) {
				t.Errorf("TryLock of a row another transaction holds, statement_timeout 300ms = %v, %v; want ErrNotObtained (held), not unavailable", got, err)
			}
			done := startLock(ctx, l)
			time.Sleep(500 * time.Millisecond)
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			r := waitFor(t, done, 5*time.Second, "once the transaction ended")
			r.Lease.Release(ctx)
		})
	}
}
