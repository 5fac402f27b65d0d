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
	"github.com/dlock-go/dlock/internal/dblease/dbleasetest"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/pglock"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The tests of this file hold pglock to its behaviour under faults (see
// Faults in the package doc): Lock waits through what heals, TryLock
// answers within its bound, and a lock's row held by another transaction
// is a held lock, not an unavailable database.

var (
	startLock = dbleasetest.StartLock
	waitFor   = dbleasetest.WaitFor
)

// A lock's row that another transaction holds (SELECT ... FOR UPDATE,
// with the server's default lock_timeout, none) is a held lock: TryLock
// says not obtained, not unavailable, within a second or so (pglock's
// statements wait at most dblease.LockWait for a row's lock); Lock waits,
// and takes the lock once the transaction ends.
func TestIntegrationRowLockedByTransaction(t *testing.T) {
	dbleasetest.RowLockedByTransaction(t, shared(sharedDB(t)))
}

// A waiter waits through the server killed with SIGKILL and started again
// (connections refused, then "the database system is starting up" while
// it recovers, 57P03), and is granted the lock once the holder gives it
// back, or its row, which the crash kept, has expired.
func TestIntegrationLockThroughKill(t *testing.T) {
	sharedDB(t) // skips under -short
	dbleasetest.LockThroughKill(t, modeNames, func(t *testing.T) dbleasetest.DB { return shared(startDB(t)) })
}

// A waiter whose connections are all reset (the proxy it goes through
// resets them) waits on, and takes the lock when the holder releases it.
func TestIntegrationWaiterConnectionsReset(t *testing.T) {
	dbleasetest.WaiterConnectionsReset(t, shared(sharedDB(t)), time.Second+dlocktest.Slack, "the fallback poll is 512ms at most")
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
			t.Logf("granted %v after the release, by the fallback poll", r.At.Sub(released).Round(time.Millisecond))
			r.Lease.Release(ctx)
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
	var waiting []<-chan dbleasetest.LockResult
	for _, m := range modes {
		waiting = append(waiting, startLock(ctx, m.newLocker(newClient(t, pg.URL()), unique("read-only"))))
	}
	time.Sleep(500 * time.Millisecond)
	set("off")
	for i, done := range waiting {
		r := waitFor(t, done, 5*time.Second, modes[i].name+" mode, once the server takes writes again")
		r.Lease.Release(ctx)
	}
}

// Close with the database silent returns within dbleasetest.CloseBound
// (where it took 10s): see dbleasetest.CloseWhileUnreachable.
func TestIntegrationCloseWhileUnreachable(t *testing.T) {
	dbleasetest.CloseWhileUnreachable(t, shared(sharedDB(t)))
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

// A Release that cannot reach the database returns an error matching
// dlock.ErrUnavailable (see dbleasetest.ReleaseUnreachable).
func TestIntegrationReleaseUnreachable(t *testing.T) {
	dbleasetest.ReleaseUnreachable(t, shared(sharedDB(t)))
}

// A Lock whose ctx ends as its first attempt to meet the database gone
// (connections reset, new ones refused) fails says ErrUnavailable (see
// dbleasetest.LockCutShortByFault).
func TestIntegrationLockCutShortByFault(t *testing.T) {
	dbleasetest.LockCutShortByFault(t, shared(sharedDB(t)), []bool{false, false})
}

// Locks and TryLocks whose ctx deadlines land mid-attempt on a healthy
// server do not say ErrUnavailable (see dbleasetest.DeadlinesOnHealthy).
func TestIntegrationDeadlinesOnHealthy(t *testing.T) {
	dbleasetest.DeadlinesOnHealthy(t, shared(sharedDB(t)), 200, false, 8*time.Millisecond)
}

// The same, on pools whose connections cancel an interrupted statement by
// a cancel request (pgconn.CancelRequestContextWatcherHandler), which the
// server answers with 57014, as it does a statement_timeout: before
// pglock's Faults.Interrupted, 1-9 of 60 session-mode Locks and TryLocks
// with a 0-3ms deadline said ErrUnavailable. In session mode only, whose
// attempts the deadline interrupts on the server the most: pgx waits
// 100ms after each cancel request.
func TestIntegrationDeadlinesOnHealthyCancelRequest(t *testing.T) {
	pg := sharedDB(t)
	db := shared(pg)
	db.Modes = modeNames[1:]
	db.Client = func(t testing.TB, addr string) dbleasetest.Client {
		cfg, err := pgxpool.ParseConfig(via(pg, addr, unique("cancelling")))
		if err != nil {
			t.Fatal(err)
		}
		cfg.ConnConfig.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
			return &pgconn.CancelRequestContextWatcherHandler{Conn: pc, DeadlineDelay: time.Second}
		}
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		c := pglock.New(pool)
		t.Cleanup(func() { c.Close() })
		return dbleasetest.Client{
			Locker: func(mode int, name string, ttl time.Duration) dlock.Locker {
				return modes[1+mode].newLocker(c, name, withTTL(ttl)...)
			},
			Close: c.Close,
		}
	}
	dbleasetest.DeadlinesOnHealthy(t, db, 60, false, 3*time.Millisecond)
}
