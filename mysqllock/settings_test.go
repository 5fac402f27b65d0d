package mysqllock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/dblease/dbleasetest"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/mysqllock"
)

// withParam returns dsn with the parameter kv ("autocommit=0") added.
func withParam(dsn, kv string) string {
	if strings.Contains(dsn, "?") {
		return dsn + "&" + kv
	}
	return dsn + "?" + kv
}

// oneHolder takes a lock in mode md through a pool of dsn and checks that
// the grant is committed (a client with autocommit on sees it held), that
// another client of dsn cannot take it while it is held, that Release
// frees it at once (seen by the plain client too), and that the next Lock
// on dsn gets it. plain is a DSN whose sessions have autocommit on.
func oneHolder(t *testing.T, md mode, dsn, plain string) {
	t.Helper()
	const ttl = 4 * time.Second
	ctx := ctxFor(t, time.Minute)
	name := unique("one-holder")
	// The holder's pool keeps no idle connection, as a pool past its
	// SetMaxIdleConns (2 by default) or SetConnMaxIdleTime does: a grant
	// left uncommitted on a connection would be rolled back when the pool
	// closes it, and the lock free for another while the holder holds it.
	pool := openDB(t, dsn)
	pool.SetMaxIdleConns(0)
	a := mysqllock.New(pool)
	t.Cleanup(func() { a.Close() })
	b, p := newClient(t, dsn), newClient(t, plain)
	held, err := md.newLocker(a, name, mysqllock.WithTTL(ttl)).TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock: %v", err)
	}
	info, err := p.Inspect(ctx, name)
	if err != nil || !info.Held() || info.Holders[0].Owner != held.Token() {
		t.Errorf("while held, a client with autocommit on inspects %+v, %v; want held by %s (the grant is not committed)", info, err, held.Token())
	}
	var second int
	for i := 0; i < 10 && time.Until(held.Until()) > time.Second; i++ {
		tctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		got, err := md.newLocker(b, name, mysqllock.WithTTL(ttl)).TryLock(tctx)
		cancel()
		if got != nil {
			second++
			t.Errorf("a second holder was granted %q, %v before the first one's Until", name, time.Until(held.Until()))
			got.Release(ctx)
		} else if !errors.Is(err, dlock.ErrNotObtained) {
			t.Errorf("TryLock while held: %v; want ErrNotObtained", err)
		}
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	start := time.Now()
	if err := held.Release(rctx); err != nil {
		t.Errorf("Release after %v: %v", time.Since(start), err)
	} else if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Release took %v; want well under a second", took)
	}
	if info, err := p.Inspect(ctx, name); err != nil || info.Held() {
		t.Errorf("after Release, a client with autocommit on inspects %+v, %v; want free", info, err)
	}
	next, err := md.newLocker(b, name, mysqllock.WithTTL(ttl)).Lock(ctxFor(t, 5*time.Second))
	if err != nil {
		t.Fatalf("Lock after Release: %v", err)
	}
	if err := next.Release(ctx); err != nil {
		t.Errorf("Release: %v", err)
	}
}

// leaderSeen campaigns through a pool of dsn and checks that a client of
// plain sees the leader's value, and none after it resigns.
func leaderSeen(t *testing.T, dsn, plain string) {
	t.Helper()
	ctx := ctxFor(t, time.Minute)
	name := unique("one-leader")
	e := newClient(t, dsn).NewElection(name, mysqllock.WithTTL(2*time.Second))
	if _, err := e.Campaign(ctx, "v1"); err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	obs := newClient(t, plain).NewElection(name)
	if ld, err := obs.Leader(ctx); err != nil || ld.Value != "v1" {
		t.Errorf("Leader() seen by a client with autocommit on = %+v, %v; want v1", ld, err)
	}
	if err := e.Resign(ctx); err != nil {
		t.Errorf("Resign: %v", err)
	}
	if ld, err := obs.Leader(ctx); !errors.Is(err, dlock.ErrNoLeader) {
		t.Errorf("Leader() after Resign = %+v, %v; want ErrNoLeader", ld, err)
	}
}

// With autocommit off, in the DSN or server-wide, every grant, release
// and renewal is committed all the same: one holder at a time, and a
// Release that returns at once.
func TestIntegrationAutocommitOff(t *testing.T) {
	t.Run("dsn", func(t *testing.T) {
		srv := sharedDB(t)
		dsn := withParam(srv.DSN(), "autocommit=0")
		for _, md := range modes {
			t.Run(md.name, func(t *testing.T) { oneHolder(t, md, dsn, srv.DSN()) })
		}
		t.Run("election", func(t *testing.T) { leaderSeen(t, dsn, srv.DSN()) })
	})
	t.Run("server", func(t *testing.T) {
		srv := settingsDB(t, "SET GLOBAL autocommit = 0")
		plain := withParam(srv.DSN(), "autocommit=1")
		for _, md := range modes {
			t.Run(md.name, func(t *testing.T) { oneHolder(t, md, srv.DSN(), plain) })
		}
		t.Run("election", func(t *testing.T) { leaderSeen(t, srv.DSN(), plain) })
	})
}

// settingsDB returns a server of t's own with mysqllock's table, on which
// root has run the statements set (SET GLOBAL ...).
func settingsDB(t *testing.T, set ...string) *testenv.MariaDB {
	t.Helper()
	srv := startDB(t)
	for _, s := range set {
		admin(t, srv, s)
	}
	return srv
}

// Under every isolation level a MariaDB server may default to, with
// autocommit on or off, contended locks and elections never return a
// deadlock (1213), a lock wait timeout (1205) or any other error to the
// caller, and never overlap.
func TestIntegrationIsolationLevels(t *testing.T) {
	t.Parallel() // a server of its own
	srv := startDB(t)
	const d = time.Second
	for _, tc := range []struct{ name, isolation, autocommit string }{
		{"repeatable-read", "REPEATABLE-READ", "1"},
		{"serializable", "SERIALIZABLE", "1"},
		{"read-committed/autocommit-off", "READ-COMMITTED", "0"},
		{"repeatable-read/autocommit-off", "REPEATABLE-READ", "0"},
		{"serializable/autocommit-off", "SERIALIZABLE", "0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			admin(t, srv, fmt.Sprintf("SET GLOBAL tx_isolation = '%s', GLOBAL autocommit = %s", tc.isolation, tc.autocommit))
			db := shared(srv, srv.DSN())
			for i, m := range db.Modes {
				t.Run(m, func(t *testing.T) { dbleasetest.Contend(t, db, i, d) })
			}
			t.Run("election", func(t *testing.T) { dbleasetest.Campaign(t, db, d) })
		})
	}
}

// A lock's row held by another transaction past innodb_lock_wait_timeout
// (error 1205, as a deadlock's 1213, is transient): TryLock says not
// obtained, and Lock waits through it and takes the lock once the
// transaction ends.
func TestIntegrationLockWaitTimeout(t *testing.T) {
	srv := sharedDB(t)
	ctx := ctxFor(t, time.Minute)
	name := unique("row-locked")
	c := newClient(t, withParam(srv.DSN(), "innodb_lock_wait_timeout=1"))
	l := c.NewMutex(name, mysqllock.WithTTL(5*time.Second))
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
	if got, err := l.TryLock(ctx); got != nil || !errors.Is(err, dlock.ErrNotObtained) {
		t.Errorf("TryLock of a row locked past innodb_lock_wait_timeout: %v, %v; want ErrNotObtained", got, err)
	}
	done := make(chan error, 1)
	go func() {
		got, err := l.Lock(ctx)
		if err == nil {
			err = got.Release(ctx)
		}
		done <- err
	}()
	time.Sleep(1500 * time.Millisecond) // past one lock wait timeout
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("Lock through lock wait timeouts: %v; want the lock", err)
	}
}

// With EMPTY_STRING_IS_NULL in the sql_mode (MariaDB's Oracle
// compatibility: an empty string literal is NULL), a release frees the
// row, a ForceUnlock frees a held lock and an election has a leader:
// mysqllock's statements write the empty token as an empty hexadecimal
// literal, which the mode leaves alone.
func TestIntegrationEmptyStringIsNull(t *testing.T) {
	srv := sharedDB(t)
	dsn := withParam(srv.DSN(), "sql_mode=%27STRICT_TRANS_TABLES,EMPTY_STRING_IS_NULL%27")
	for _, md := range modes {
		t.Run(md.name, func(t *testing.T) {
			oneHolder(t, md, dsn, srv.DSN())
			ctx := ctxFor(t, time.Minute)
			c, name := newClient(t, dsn), unique("forced")
			held, err := md.newLocker(c, name).TryLock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer held.Release(ctx)
			if ok, err := c.ForceUnlock(ctx, name); !ok || err != nil {
				t.Errorf("ForceUnlock of a held lock = %v, %v; want true", ok, err)
			}
		})
	}
	t.Run("election", func(t *testing.T) { leaderSeen(t, dsn, srv.DSN()) })
}

// With an init_connect that begins a transaction, which autocommit (on)
// does not end, every grant, release and renewal is committed all the
// same: one holder at a time, and a Release that returns at once. root
// runs no init_connect: its sessions see what is committed.
func TestIntegrationInitConnectTransaction(t *testing.T) {
	t.Parallel() // a server of its own: init_connect is server-wide
	srv := settingsDB(t, "SET GLOBAL init_connect = 'START TRANSACTION'")
	for _, md := range modes {
		t.Run(md.name, func(t *testing.T) { oneHolder(t, md, srv.DSN(), srv.RootDSN()) })
	}
	t.Run("election", func(t *testing.T) { leaderSeen(t, srv.DSN(), srv.RootDSN()) })
}

// With max_statement_time (MariaDB) shorter than the waits of the retry
// strategy, which a session-mode Lock spends in GET_LOCK on the server,
// the server cuts each wait short, and Lock waits on until the holder
// releases the lock.
func TestIntegrationMaxStatementTime(t *testing.T) {
	srv := sharedDB(t)
	ctx := ctxFor(t, time.Minute)
	name := unique("max-statement-time")
	held, err := sessionMode.newLocker(newClient(t, srv.DSN()), name, mysqllock.WithTTL(5*time.Second)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const hold = 1500 * time.Millisecond
	released := make(chan error, 1)
	go func() { time.Sleep(hold); released <- held.Release(ctx) }()
	c := newClient(t, withParam(srv.DSN(), "max_statement_time=0.2"))
	l := sessionMode.newLocker(c, name, mysqllock.WithTTL(5*time.Second), mysqllock.WithRetry(dlock.ExponentialBackoff(time.Second, time.Second)))
	start := time.Now()
	got, err := l.Lock(ctx)
	if err != nil {
		t.Fatalf("Lock, with max_statement_time shorter than its waits, after %v: %v; want the lock once released", time.Since(start), err)
	}
	if err := <-released; err != nil {
		t.Errorf("Release: %v", err)
	}
	if err := got.Release(ctx); err != nil {
		t.Errorf("Release: %v", err)
	}
}

// With max_statement_time (MariaDB) shorter than mysqllock's lock wait (a
// second), a lock whose row another transaction holds is still a held
// lock: TryLock returns an error matching dlock.ErrNotObtained, not
// dlock.ErrUnavailable (it returned "unavailable: Error 1969: Query
// execution was interrupted (max_statement_time exceeded)" after 300ms
// before the statements that wait for a row's lock ran without it), and
// Lock takes the lock once the transaction ends.
func TestIntegrationMaxStatementTimeBelowLockWait(t *testing.T) {
	srv := sharedDB(t)
	dsn := withParam(srv.DSN(), "max_statement_time=0.3")
	for _, md := range modes {
		t.Run(md.name, func(t *testing.T) {
			ctx := ctxFor(t, time.Minute)
			name := unique("max-statement-time")
			l := md.newLocker(newClient(t, dsn), name, mysqllock.WithTTL(5*time.Second))
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
			got, err := l.TryLock(ctxFor(t, 10*time.Second))
			if got != nil || !errors.Is(err, dlock.ErrNotObtained) || errors.Is(err, dlock.ErrUnavailable) {
				t.Errorf("TryLock of a row another transaction holds, max_statement_time 0.3 = %v, %v; want ErrNotObtained (held), not unavailable", got, err)
			}
			done := startLock(ctx, l)
			time.Sleep(500 * time.Millisecond)
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			r := waitFor(t, done, 5*time.Second, "once the transaction ended")
			r.Lease.Release(ctx)
		})
	}
}
