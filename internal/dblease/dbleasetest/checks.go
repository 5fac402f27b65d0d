package dbleasetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/dblease"
	"github.com/dlock-go/dlock/internal/testenv"
)

// slack is the scheduling allowance of the timing checks, dlocktest.Slack
// (which this package, shared by the backends, does not import).
const slack = 150 * time.Millisecond

// A DB is a backend's database as the checks of this package reach it.
type DB struct {
	// Addr is the server's address, for a proxy in front of it.
	Addr string
	// Modes names the backend's kinds of lock, in the order that
	// Client.Locker numbers them: "lease", "session".
	Modes []string
	// Client returns a new Client of the database, through addr (Addr, or
	// a proxy's), closed when t ends.
	Client func(t testing.TB, addr string) Client
	// ErrClosed is the backend's error for a call on a closed Client.
	ErrClosed error
	// LockRow begins a transaction, out of band, that locks the row of the
	// lock called name (SELECT ... FOR UPDATE), and returns its commit.
	LockRow func(t testing.TB, ctx context.Context, name string) (commit func() error)
	// Kill kills the server with SIGKILL; Restart starts it again on its
	// data. Only the checks that take a server of their own use them.
	Kill, Restart func() error
	// WrapAttempts has l, a lock of a Client's, not yet in use, make its
	// attempts through wrap.
	WrapAttempts func(l dlock.Locker, wrap func(dblease.AttemptFunc) dblease.AttemptFunc)
}

// A Client is one of a backend's Clients.
type Client struct {
	// Locker returns the lock called name in mode (an index of DB.Modes),
	// with TTL ttl, or the default TTL if ttl is 0.
	Locker func(mode int, name string, ttl time.Duration) dlock.Locker
	// Election returns the election called name, with TTL ttl.
	Election func(name string, ttl time.Duration) dlock.Election
	Close    func() error
}

// locker returns the lock called name in mode on a Client of its own.
func (db DB) locker(t testing.TB, mode int, name string, ttl time.Duration) dlock.Locker {
	return db.Client(t, db.Addr).Locker(mode, name, ttl)
}

// Contend has several Clients take and release one lock, in mode, for d,
// refreshing each lease once, and fails t if any Lock, Refresh or Release
// returns an error, or two hold the lock at once.
func Contend(t *testing.T, db DB, mode int, d time.Duration) {
	t.Helper()
	name := Unique("contended")
	var inside, overlaps, grants atomic.Int64
	var errs errCount
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for range 4 {
		l := db.locker(t, mode, name, 5*time.Second)
		wg.Go(func() {
			for time.Now().Before(deadline) {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				lease, err := l.Lock(ctx)
				if err != nil {
					errs.note("Lock", err)
					cancel()
					continue
				}
				if inside.Add(1) > 1 {
					overlaps.Add(1)
				}
				grants.Add(1)
				time.Sleep(time.Millisecond)
				inside.Add(-1)
				errs.note("Refresh", lease.Refresh(ctx))
				errs.note("Release", lease.Release(ctx))
				cancel()
			}
		})
	}
	wg.Wait()
	t.Logf("%s mode: %d grants in %v", db.Modes[mode], grants.Load(), d)
	errs.report(t)
	if n := overlaps.Load(); n > 0 {
		t.Errorf("%d grants overlapped another", n)
	}
	if grants.Load() == 0 {
		t.Error("no grant at all")
	}
}

// Campaign has several Clients campaign and resign in one election for
// d, and fails t if any Campaign or Resign returns an error.
func Campaign(t *testing.T, db DB, d time.Duration) {
	t.Helper()
	name := Unique("campaign")
	var errs errCount
	var terms atomic.Int64
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for range 3 {
		e := db.Client(t, db.Addr).Election(name, 5*time.Second)
		wg.Go(func() {
			for time.Now().Before(deadline) {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_, err := e.Campaign(ctx, "v")
				if err == nil {
					terms.Add(1)
					err = e.Resign(ctx)
				}
				cancel()
				errs.note("Campaign or Resign", err)
			}
		})
	}
	wg.Wait()
	t.Logf("%d terms in %v", terms.Load(), d)
	errs.report(t)
}

// errCount counts errors by their text.
type errCount struct {
	mu sync.Mutex
	n  map[string]int
}

// note counts err, if it is not nil, as the error of what.
func (c *errCount) note(what string, err error) {
	if err == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[fmt.Sprintf("%s: %v", what, err)]++
}

// report fails t with each error counted.
func (c *errCount) report(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for e, n := range c.n {
		t.Errorf("%d times %s", n, e)
	}
}

// RowLockedByTransaction: a lock's row that another transaction holds is
// a held lock. TryLock says not obtained, not unavailable, within the
// statements' lock wait (dblease.LockWait) and a round trip; Lock waits,
// and takes the lock once the transaction ends.
func RowLockedByTransaction(t *testing.T, db DB) {
	for mode, modeName := range db.Modes {
		t.Run(modeName, func(t *testing.T) {
			t.Parallel() // the modes' locks have names of their own
			ctx := Ctx(t, time.Minute)
			name := Unique("row-locked")
			l := db.locker(t, mode, name, 5*time.Second)
			first, err := l.TryLock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			first.Release(ctx)
			commit := db.LockRow(t, ctx, name)
			start := time.Now()
			got, err := l.TryLock(Ctx(t, 10*time.Second))
			took := time.Since(start)
			t.Logf("TryLock of a row another transaction holds: %v after %v", err, took.Round(time.Millisecond))
			if got != nil || !errors.Is(err, dlock.ErrNotObtained) || errors.Is(err, dlock.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("TryLock of a row another transaction holds = %v, %v; want ErrNotObtained (held), not unavailable", got, err)
			}
			if took > 2*time.Second {
				t.Errorf("TryLock of a row another transaction holds took %v; want the lock wait, 1s, and a round trip", took)
			}
			done := StartLock(ctx, l)
			time.Sleep(1500 * time.Millisecond) // past a lock wait
			ended := time.Now()
			if err := commit(); err != nil {
				t.Fatal(err)
			}
			r := WaitFor(t, done, 5*time.Second, "once the transaction ended")
			t.Logf("Lock granted %v after the transaction ended", r.At.Sub(ended).Round(time.Millisecond))
			r.Lease.Release(ctx)
		})
	}
}

// LockThroughKill: a waiter waits through the server killed with SIGKILL
// and started again, and is granted the lock once the holder gives it
// back, or its row, which the crash kept, has expired, with a higher
// fence. newDB returns a server of the subtest's own.
func LockThroughKill(t *testing.T, modes []string, newDB func(t *testing.T) DB) {
	for mode, modeName := range modes {
		t.Run(modeName, func(t *testing.T) {
			t.Parallel()
			db := newDB(t)
			ctx := Ctx(t, time.Minute)
			const ttl = 2 * time.Second
			name := Unique("killed")
			held, err := db.locker(t, mode, name, ttl).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			done := StartLock(ctx, db.locker(t, mode, name, ttl))
			time.Sleep(200 * time.Millisecond) // waiting
			if err := db.Kill(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Second) // refused
			if err := db.Restart(); err != nil {
				t.Fatal(err)
			}
			back := time.Now()
			go held.Release(ctx) // its lease may have ended meanwhile
			r := WaitFor(t, done, ttl+5*time.Second, "through the kill and the restart")
			defer r.Lease.Release(ctx)
			t.Logf("granted %v after the restart", r.At.Sub(back).Round(time.Millisecond))
			if r.Lease.Fence() <= held.Fence() {
				t.Errorf("fence %d after %d", r.Lease.Fence(), held.Fence())
			}
		})
	}
}

// WaiterConnectionsReset: a waiter whose connections are all reset (the
// proxy it goes through resets them) waits on, and takes the lock within
// within of the holder's release; why says why that is its bound.
func WaiterConnectionsReset(t *testing.T, db DB, within time.Duration, why string) {
	for mode, modeName := range db.Modes {
		t.Run(modeName, func(t *testing.T) {
			t.Parallel() // the modes' locks have names of their own
			ctx := Ctx(t, time.Minute)
			name := Unique("reset")
			held, err := db.locker(t, mode, name, 0).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			proxy := testenv.StartProxy(t, db.Addr)
			done := StartLock(ctx, db.Client(t, proxy.Addr()).Locker(mode, name, 0))
			for range 5 {
				time.Sleep(100 * time.Millisecond)
				proxy.Reset()
			}
			select {
			case r := <-done:
				t.Fatalf("Lock returned (%v, %v) while the lock was held", r.Lease, r.Err)
			case <-time.After(100 * time.Millisecond):
			}
			released := time.Now()
			if err := held.Release(ctx); err != nil {
				t.Fatal(err)
			}
			r := WaitFor(t, done, within, "after the release ("+why+")")
			t.Logf("granted %v after the release", r.At.Sub(released).Round(time.Millisecond))
			r.Lease.Release(ctx)
		})
	}
}

// CloseBound is how long Close may wait for a database that does not
// answer: 1.5s for the releases, then 0.1s for a release still under way
// and 0.1s for the clean-ups (see dblease.Client.Close).
const CloseBound = 1700 * time.Millisecond

// CloseWhileUnreachable: Close with the database silent, a Client holding
// leases of every mode and a Lock waiting, returns within CloseBound: it
// does not wait for a database that does not answer. The leases end, and
// the Lock returns with ErrNotObtained and ErrClosed.
func CloseWhileUnreachable(t *testing.T, db DB) {
	proxy := testenv.StartProxy(t, db.Addr)
	c := db.Client(t, proxy.Addr())
	t.Cleanup(func() { proxy.Close() }) // before the Client's pool closes, which may wait for the driver's cancel requests
	ctx := Ctx(t, time.Minute)
	var held []dlock.Lease
	for mode := range db.Modes {
		for range 3 {
			l, err := c.Locker(mode, Unique("close"), 3*time.Second).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, l)
		}
	}
	done := StartLock(ctx, c.Locker(0, held[0].Key(), 0))
	time.Sleep(100 * time.Millisecond)
	proxy.Blackhole(true)
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	err := c.Close()
	took := time.Since(start)
	t.Logf("Close with the database silent took %v: %v", took.Round(time.Millisecond), err)
	if took > CloseBound+slack {
		t.Errorf("Close with the database silent took %v; want within %v", took, CloseBound)
	}
	select {
	case r := <-done:
		if !errors.Is(r.Err, dlock.ErrNotObtained) || !errors.Is(r.Err, db.ErrClosed) {
			t.Errorf("Lock ended by Close = %v, %v; want ErrNotObtained and ErrClosed", r.Lease, r.Err)
		}
	case <-time.After(time.Second):
		t.Fatal("Lock still waiting after Close returned")
	}
	for _, l := range held {
		select {
		case <-l.Done():
		case <-time.After(time.Until(l.Until()) + slack):
			t.Fatalf("lease %q still open at its Until after Close", l.Key())
		}
	}
}

// ReleaseUnreachable: a Release that cannot reach the database returns an
// error matching dlock.ErrUnavailable, as TryLock's does, within the
// lease's attempt timeout (dblease.AttemptTimeout) and a round trip, and
// the lease ends as released: the holder is done with it, and the row is
// freed in the background or expires. The database is silent (every mode),
// or refuses connections and resets the open ones (lease mode: in session
// mode a reset connection ends the session, and the lease is lost).
func ReleaseUnreachable(t *testing.T, db DB) {
	// Past the attempt timeout, 5s, a silent database's Release gives up
	// while the lease is still valid: at a TTL of 5s or less the lease
	// would expire first, and Release would rightly say so.
	const ttl = 9 * time.Second
	for mode, modeName := range db.Modes {
		for _, refuse := range []bool{false, true} {
			if refuse && modeName != "lease" {
				continue
			}
			fault := "silent"
			if refuse {
				fault = "refused"
			}
			t.Run(modeName+"/"+fault, func(t *testing.T) {
				t.Parallel()
				proxy := testenv.StartProxy(t, db.Addr)
				c := db.Client(t, proxy.Addr())
				t.Cleanup(func() { proxy.Close() }) // before the Client's pool closes
				ctx := Ctx(t, time.Minute)
				lease, err := c.Locker(mode, Unique("release-unreachable"), ttl).Lock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if refuse {
					proxy.SetRefuse(true)
					proxy.Reset()
				} else {
					proxy.Blackhole(true)
				}
				start := time.Now()
				err = lease.Release(ctx)
				took := time.Since(start)
				t.Logf("Release with the database %s: %v after %v", fault, err, took.Round(time.Millisecond))
				if !errors.Is(err, dlock.ErrUnavailable) {
					t.Errorf("Release with the database %s = %v; want an error matching ErrUnavailable", fault, err)
				}
				if bound := dblease.AttemptTimeout(ttl) + time.Second; took > bound {
					t.Errorf("Release with the database %s took %v; want within %v", fault, took, bound)
				}
				if err := lease.Err(); err != dlock.ErrReleased {
					t.Errorf("Err() after a Release that did not reach the database = %v; want ErrReleased", err)
				}
			})
		}
	}
}

// LockCutShortByFault: a Lock waiting behind a holder of its mode (in
// session mode, the waiter waits on the server where it can), whose
// connections the proxy it goes through resets, refusing new ones, and
// whose ctx ends as the first attempt that met the fault returns its
// failure (WrapAttempts cancels it there: the goroutine that got the
// failure may run after the end of ctx that it beat), returns with
// ErrNotObtained, ctx's error and ErrUnavailable: its database went, and
// the caller must not be sent to look for a holder. Then Close returns
// within CloseBound, and with no error in the modes that quiet marks,
// whose attempt met the fault where it leaves nothing to clean up.
func LockCutShortByFault(t *testing.T, db DB, quiet []bool) {
	for mode, modeName := range db.Modes {
		t.Run(modeName, func(t *testing.T) {
			t.Parallel() // the modes' locks have names of their own
			name := Unique("cut-short")
			held, err := db.locker(t, mode, name, 0).Lock(Ctx(t, time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			defer held.Release(Ctx(t, 10*time.Second))
			proxy := testenv.StartProxy(t, db.Addr)
			c := db.Client(t, proxy.Addr())
			t.Cleanup(func() { proxy.Close() }) // before the Client's pool closes
			l := c.Locker(mode, name, 0)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var attempts atomic.Int64
			var armed atomic.Bool
			failed := make(chan error, 1)
			db.WrapAttempts(l, func(next dblease.AttemptFunc) dblease.AttemptFunc {
				return func(actx context.Context, block time.Duration) (dlock.Lease, time.Duration, error) {
					attempts.Add(1)
					got, left, err := next(actx, block)
					if err != nil && armed.Load() {
						select {
						case failed <- err:
						default:
						}
						cancel()
					}
					return got, left, err
				}
			})
			done := StartLock(ctx, l)
			for give := time.Now().Add(30 * time.Second); attempts.Load() < 3; {
				select {
				case r := <-done:
					t.Fatalf("Lock of a held lock returned (%v, %v) before the fault", r.Lease, r.Err)
				case <-time.After(10 * time.Millisecond):
				}
				if time.Now().After(give) {
					t.Fatalf("Lock of a held lock made %d attempts in 30s; want 3", attempts.Load())
				}
			}
			armed.Store(true)
			proxy.SetRefuse(true)
			proxy.Reset()
			var r LockResult
			select {
			case r = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("Lock still waiting 30s after its connections were reset and new ones refused")
			}
			if r.Err == nil {
				r.Lease.Release(Ctx(t, 10*time.Second))
				t.Fatal("Lock of a held lock with its database gone succeeded")
			}
			var own error
			select {
			case own = <-failed:
			default:
				t.Fatalf("Lock returned %v with no attempt failed since the fault", r.Err)
			}
			t.Logf("the attempt failed with %v; Lock returned %v", own, r.Err)
			if !errors.Is(r.Err, dlock.ErrNotObtained) || !errors.Is(r.Err, context.Canceled) || !errors.Is(r.Err, dlock.ErrUnavailable) {
				t.Errorf("Lock whose ctx ended as its attempt met its database gone = %v; want ErrNotObtained, Canceled and ErrUnavailable", r.Err)
			}
			start := time.Now()
			err = c.Close()
			took := time.Since(start)
			t.Logf("Close with the database gone took %v: %v", took.Round(time.Millisecond), err)
			if took > CloseBound+slack {
				t.Errorf("Close with the database gone took %v; want within %v", took, CloseBound)
			}
			if err != nil && quiet[mode] {
				t.Errorf("Close after a wait that the fault cut short = %v; want nil: the attempt left nothing to clean up", err)
			}
		})
	}
}
