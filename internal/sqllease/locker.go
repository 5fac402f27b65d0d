package sqllease

import (
	"context"
	"errors"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/lease"
	"github.com/dlock-go/dlock/internal/pause"
)

// An AttemptFunc makes one attempt at a lock. It returns a lease; or nil,
// how long the holder's claim has left if it is known (0 if not, or Busy),
// and possibly an error matching dlock.ErrNotObtained that says why; or a
// hard error. An attempt that can wait on the server for the holder's
// release waits up to block; others ignore it.
type AttemptFunc func(ctx context.Context, block time.Duration) (dlock.Lease, time.Duration, error)

// Busy is the left of an attempt that found the lock held in a way the
// server can wait on: the next attempt waits there, up to the retry
// strategy's backoff, for the release, which wakes it at once.
const Busy = -1

// A Locker is what the locks of either mode share: the lock's name and
// events, and the way Lock and TryLock go about their attempts, which are
// the only thing the modes do differently. It is safe for concurrent use.
type Locker struct {
	Name    string
	Err     error           // a bad name or option, reported by every call
	Events  *lease.Events   // nil without an observer
	Held    *lease.Registry // the Client's leases of this mode
	Retry   dlock.RetryStrategy
	Usable  func() error              // the error of an unusable Client, or nil
	Wait    func(name string) *Waiter // registers a waiter for a release
	Attempt AttemptFunc

	// Transient reports whether an attempt's error is transient (see
	// Dialect.Transient): the attempt is made again at once. Nil: none is.
	Transient func(error) bool
}

// TryLock makes one attempt to take the lock. It returns an error matching
// dlock.ErrNotObtained if another owner holds it.
func (l *Locker) TryLock(ctx context.Context) (dlock.Lease, error) {
	a := l.Events.Begin()
	return a.End(l.Held.Call(ctx, l.tryLock))
}

func (l *Locker) tryLock(ctx context.Context) (dlock.Lease, error) {
	if err := l.check(ctx); err != nil {
		return nil, err
	}
	got, _, err := l.attempt(ctx, 0)
	if got == nil && err == nil {
		err = dlock.ErrNotObtained
	}
	return got, err
}

// Lock takes the lock, waiting until it is free, ctx is done or the retry
// strategy gives up. If ctx is done first, the error matches both
// dlock.ErrNotObtained and ctx.Err().
func (l *Locker) Lock(ctx context.Context) (dlock.Lease, error) {
	a := l.Events.Begin()
	return a.End(l.Held.Call(ctx, func(ctx context.Context) (dlock.Lease, error) {
		if err := l.check(ctx); err != nil {
			return nil, err
		}
		return l.wait(ctx, &a)
	}))
}

// check returns the error a Lock or TryLock must fail with before it
// starts, if any.
func (l *Locker) check(ctx context.Context) error {
	if l.Err != nil {
		return l.Err
	}
	if err := l.Usable(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return dlock.NotObtained(err)
	}
	if l.Held.Holds(ctx, l.Name) {
		return dlock.ErrNotReentrant
	}
	return nil
}

// obtained reports whether an attempt's outcome ends a Lock: a lease, or a
// hard error.
func obtained(l dlock.Lease, err error) bool {
	return l != nil || err != nil && !errors.Is(err, dlock.ErrNotObtained)
}

// wait tries once; if the lock is held, it waits for a release, for the
// holder's claim to run out, or for the retry strategy's backoff,
// whichever comes first, and tries again, until it obtains the lock, ctx
// is done, or the strategy gives up. While the server can wait for the
// release (see Busy), the backoff is spent in the next attempt, there.
func (l *Locker) wait(ctx context.Context, a *lease.Attempt) (dlock.Lease, error) {
	if got, _, err := l.attempt(ctx, 0); obtained(got, err) {
		return got, err
	}
	a.Waiting()
	w := l.Wait(l.Name)
	defer w.Close()
	var idle pause.Timer
	defer idle.Stop()
	var block time.Duration
	for n := 1; ; n++ {
		if err := l.Usable(); err != nil {
			return nil, err
		}
		// Try again at once on the first round: a release may have come
		// between the first attempt and the waiter's registration.
		got, left, err := l.attempt(ctx, block)
		block = 0
		if obtained(got, err) {
			return got, err
		}
		wait, ok := l.Retry.Backoff(n)
		if !ok {
			if err != nil {
				return nil, err
			}
			return nil, dlock.ErrNotObtained
		}
		if left == Busy { // wait on the server, for its release
			block = wait
			continue
		}
		if left > 0 && left < wait { // the holder's lease runs out first
			wait = left
		}
		if !idle.Wait(ctx, w.c, wait) {
			return nil, lease.Interrupted(ctx.Err(), err)
		}
	}
}

// Cancelled returns the context error behind a failed call, or nil: ctx's
// own, or the one err wraps.
func Cancelled(ctx context.Context, err error) error {
	if e := ctx.Err(); e != nil {
		return e
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return context.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		return context.Canceled
	}
	return nil
}
