package pglock

import (
	"context"
	"errors"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/lease"
	"github.com/dlock-go/dlock/internal/pause"
)

// A locker is what Mutex and SessionMutex share: the lock's name, options
// and events, and the way Lock and TryLock go about their attempts, which
// are the only thing the two modes do differently.
type locker struct {
	c       *Client
	name    string
	cfg     config
	err     error           // a bad name or option, reported by every call
	ev      *lease.Events   // nil without an observer
	held    *lease.Registry // the Client's leases of this mode
	attempt attemptFunc
}

// An attemptFunc makes one attempt at a lock. It returns a lease; or nil,
// how long the holder's claim has left if it is known (0 if not), and
// possibly an error matching dlock.ErrNotObtained that says why; or a hard
// error.
type attemptFunc func(ctx context.Context) (dlock.Lease, time.Duration, error)

func newLocker(c *Client, name, kind string, held *lease.Registry, opts []Option, attempt attemptFunc) locker {
	l := locker{c: c, name: name, cfg: newConfig(opts), ev: lease.NewEvents(c.obs, name, kind), held: held, attempt: attempt}
	l.err = errors.Join(checkName("lock", name), l.cfg.check())
	return l
}

// Name returns the lock's name.
func (l *locker) Name() string { return l.name }

// TryLock makes one attempt to take the lock. It returns an error matching
// dlock.ErrNotObtained if another owner holds it.
func (l *locker) TryLock(ctx context.Context) (dlock.Lease, error) {
	a := l.ev.Begin()
	if err := l.check(ctx); err != nil {
		return a.End(nil, err)
	}
	got, _, err := l.attempt(ctx)
	if got == nil && err == nil {
		err = dlock.ErrNotObtained
	}
	return a.End(got, err)
}

// Lock takes the lock, waiting until it is free, ctx is done or the retry
// strategy gives up. A waiter is woken at once by the holder's release
// notice; otherwise it tries again when the retry strategy says so. If ctx
// is done first, the error matches both dlock.ErrNotObtained and
// ctx.Err().
func (l *locker) Lock(ctx context.Context) (dlock.Lease, error) {
	a := l.ev.Begin()
	if err := l.check(ctx); err != nil {
		return a.End(nil, err)
	}
	return a.End(l.wait(ctx, &a))
}

// check returns the error a Lock or TryLock must fail with before it
// starts, if any.
func (l *locker) check(ctx context.Context) error {
	if l.err != nil {
		return l.err
	}
	if err := l.c.usable(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return dlock.NotObtained(err)
	}
	if l.held.Holds(ctx, l.name) {
		return ErrNotReentrant
	}
	return nil
}

// obtained reports whether an attempt's outcome ends a Lock: a lease, or a
// hard error.
func obtained(l dlock.Lease, err error) bool {
	return l != nil || err != nil && !errors.Is(err, dlock.ErrNotObtained)
}

// wait tries once; if the lock is held, it waits for a release notice, for
// the holder's claim to run out, or for the retry strategy's backoff,
// whichever comes first, and tries again, until it obtains the lock, ctx
// is done, or the strategy gives up.
func (l *locker) wait(ctx context.Context, a *lease.Attempt) (dlock.Lease, error) {
	if got, _, err := l.attempt(ctx); obtained(got, err) {
		return got, err
	}
	a.Waiting()
	w := l.c.notices.wait(l.name)
	defer w.close()
	var idle pause.Timer
	defer idle.Stop()
	for n := 1; ; n++ {
		if err := l.c.usable(); err != nil {
			return nil, err
		}
		// Try again at once on the first round: a release may have come
		// between the first attempt and the waiter's registration.
		got, left, err := l.attempt(ctx)
		if obtained(got, err) {
			return got, err
		}
		wait, ok := l.cfg.retry.Backoff(n)
		if !ok {
			if err != nil {
				return nil, err
			}
			return nil, dlock.ErrNotObtained
		}
		if left > 0 && left < wait { // the holder's lease runs out first
			wait = left
		}
		if !idle.Wait(ctx, w.c, wait) {
			return nil, lease.Interrupted(ctx.Err(), err)
		}
	}
}
