package mysqllock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/dblease/dbleasetest"
)

// The tests of this file hold mysqllock to its behaviour under faults
// (see Faults in the package doc): Lock waits through what heals, TryLock
// answers within its bound, and a lock's row held by another transaction
// is a held lock, not an unavailable database.

var (
	startLock = dbleasetest.StartLock
	waitFor   = dbleasetest.WaitFor
)

// A lock's row that another transaction holds (SELECT ... FOR UPDATE,
// with the server's default innodb_lock_wait_timeout, 50s) is a held
// lock: TryLock says not obtained, not unavailable, within a second or so
// (mysqllock's statements wait at most dblease.LockWait for a row's
// lock), where it took three lock waits, 150s; Lock waits, and takes the
// lock once the transaction ends.
func TestIntegrationRowLockedByTransaction(t *testing.T) {
	srv := sharedDB(t)
	dbleasetest.RowLockedByTransaction(t, shared(srv, srv.DSN()))
}

// A waiter waits through the server killed with SIGKILL and started again
// (connections refused, reset, then a server recovering), and is granted
// the lock once the holder gives it back, or its row, which the crash
// kept, has expired.
func TestIntegrationLockThroughKill(t *testing.T) {
	sharedDB(t) // skips under -short
	dbleasetest.LockThroughKill(t, modeNames, func(t *testing.T) dbleasetest.DB {
		srv := startDB(t)
		return shared(srv, srv.DSN())
	})
}

// A waiter whose connections are all reset (the proxy it goes through
// resets them: in session mode, the one waiting in GET_LOCK on the
// server) waits on, and takes the lock when the holder releases it.
func TestIntegrationWaiterConnectionsReset(t *testing.T) {
	srv := sharedDB(t)
	dbleasetest.WaiterConnectionsReset(t, shared(srv, srv.DSN()), time.Second, "the poll is 64ms at most")
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
	var waiting []<-chan dbleasetest.LockResult
	for _, md := range modes {
		waiting = append(waiting, startLock(ctx, md.newLocker(newClient(t, srv.DSN()), unique("read-only"))))
	}
	time.Sleep(500 * time.Millisecond)
	admin(t, srv, "SET GLOBAL read_only = 0")
	for i, done := range waiting {
		r := waitFor(t, done, 5*time.Second, modes[i].name+" mode, once the server takes writes again")
		r.Lease.Release(ctx)
	}
}

// Close with the database silent returns within dbleasetest.CloseBound
// (where it took 10s): see dbleasetest.CloseWhileUnreachable.
func TestIntegrationCloseWhileUnreachable(t *testing.T) {
	srv := sharedDB(t)
	dbleasetest.CloseWhileUnreachable(t, shared(srv, srv.DSN()))
}

// A Release that cannot reach the database returns an error matching
// dlock.ErrUnavailable (see dbleasetest.ReleaseUnreachable).
func TestIntegrationReleaseUnreachable(t *testing.T) {
	srv := sharedDB(t)
	dbleasetest.ReleaseUnreachable(t, shared(srv, srv.DSN()))
}

// A Lock whose ctx ends as its first attempt to meet the database gone
// (connections reset, new ones refused) fails says ErrUnavailable (see
// dbleasetest.LockCutShortByFault); a session-mode waiter, cut off in
// GET_LOCK, leaves nothing for Close to clean up.
func TestIntegrationLockCutShortByFault(t *testing.T) {
	srv := sharedDB(t)
	dbleasetest.LockCutShortByFault(t, shared(srv, srv.DSN()), []bool{false, true})
}

// Locks and TryLocks whose ctx deadlines land mid-attempt on a healthy
// server do not say ErrUnavailable (see dbleasetest.DeadlinesOnHealthy):
// 24 of 400 did, with a dial's i/o timeout or driver.ErrBadConn, before
// dblease told the end of ctx from the database's failure.
func TestIntegrationDeadlinesOnHealthy(t *testing.T) {
	srv := sharedDB(t)
	dbleasetest.DeadlinesOnHealthy(t, shared(srv, srv.DSN()), 200, true, 8*time.Millisecond)
}
