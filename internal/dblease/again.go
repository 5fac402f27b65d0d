package dblease

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/lease"
)

// Tries is how many times a statement that fails with a transient error
// (see Faults.Transient) is run in all before its error counts: such a
// failure says that a concurrent statement got in the way, and the next
// try finds it done.
const Tries = 3

// Again runs f until it returns nil or an error that transient does not
// report as transient, Tries times at most, pausing a few random
// milliseconds between tries, and returns its last error. It stops early,
// with f's error, when ctx is done.
func Again(ctx context.Context, transient func(error) bool, f func() error) error {
	for i := 1; ; i++ {
		err := f()
		if err == nil || transient == nil || !transient(err) || i == Tries || !pauseBefore(ctx, i) {
			return err
		}
	}
}

// pauseBefore waits before try i+1: up to 2ms times i, at random, so that
// the attempts that collided do not meet again. It reports false if ctx
// ended the wait.
func pauseBefore(ctx context.Context, i int) bool {
	t := time.NewTimer(time.Duration(rand.Int64N(int64(2*time.Millisecond)*int64(i))) + 100*time.Microsecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// attempt makes one attempt at the lock, within Timeout beyond block, and
// makes it again, Tries times at most (see Again), while it fails with a
// transient error: a serialization failure or a deadlock, which a
// concurrent attempt on the same row causes. An attempt so failing has
// taken nothing, and left nothing to clean up: its statement did not run.
// If the last try fails so too, the attempt did not obtain the lock, and
// the error, which matches dlock.ErrNotObtained, says why: Lock waits and
// tries again, and TryLock returns it. So does an attempt whose statement
// waited for the row's lock, held by another transaction, until its lock
// wait ran out (RowLocked), which is not made again: the lock is held.
//
// An attempt the database has not answered within Timeout (beyond block)
// is given up, with a *NoAnswerError, unless ctx ended first.
func (l *Locker) attempt(ctx context.Context, block time.Duration) (dlock.Lease, time.Duration, error) {
	actx, cancel := context.WithTimeout(ctx, block+l.Timeout)
	defer cancel()
	var got dlock.Lease
	var left time.Duration
	err := Again(actx, l.retried, func() (err error) {
		got, left, err = l.Attempt(actx, block)
		return err
	})
	switch {
	case got != nil || err == nil:
	case !ended(ctx) && ended(actx) && errors.Is(err, context.DeadlineExceeded) && !lease.IsShort(err):
		// Cut short by the timeout, not by ctx (whose deadlines may have
		// passed before their timers ran: see Cancelled); a grant given
		// back for coming too late is an answer (see lease.Fresh).
		return nil, 0, &NoAnswerError{Pkg: l.Pkg, Name: l.Name, After: block + l.Timeout}
	case l.RowLocked != nil && l.RowLocked(err):
		return nil, 0, dlock.NotObtained(fmt.Errorf("%s: %q is held: another transaction holds its row: %w", l.Pkg, l.Name, err))
	case l.Transient != nil && l.Transient(err):
		return nil, 0, dlock.NotObtained(err)
	}
	return got, left, err
}

// retried reports whether an attempt that failed with err is made again
// at once: a transient error that is not a lock wait run out.
func (l *Locker) retried(err error) bool {
	return l.Transient != nil && l.Transient(err) && (l.RowLocked == nil || !l.RowLocked(err))
}
