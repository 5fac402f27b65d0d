package dblease

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/lease"
	"github.com/dlock-go/dlock/internal/pause"
)

// An AttemptFunc makes one attempt at a lock. It returns a lease; or nil,
// how long the holder's claim has left if it is known (0 if not, or Busy),
// and possibly an error matching dlock.ErrNotObtained that says why; or
// another error, which the Locker's Unavailable may report as one that
// heals. An attempt that can wait on the server for the holder's release
// waits up to block; others ignore it.
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

	// Timeout bounds each attempt, beyond the time it may wait on the
	// server (its block): an attempt the database has not answered by
	// then is given up, and counts as one that found it unavailable.
	Timeout time.Duration

	// Faults says what an attempt's error means.
	Faults

	Cfg Config  // the lock's options
	c   *Client // the Client whose lock it is
}

// NewLocker returns the Locker of the lock called name, of kind ("Mutex",
// "SessionMutex") and options cfg, in session mode if session is true,
// whose attempts are made by attempt. err is what is wrong with the
// name or the options, if anything: every Lock and TryLock returns it,
// and so they do if the TTL is longer than the Client's restart window.
func (c *Client) NewLocker(name, kind string, session bool, cfg Config, err error, attempt AttemptFunc) *Locker {
	held := &c.Grants
	if session {
		held = &c.Sessions
	}
	return &Locker{
		Name: name, Err: errors.Join(err, c.Cfg.Restart.CheckTTL(c.Pkg, cfg.TTL)), Events: lease.NewEvents(c.Obs, c.Pkg, name, kind),
		Held: held, Retry: cfg.Retry, Usable: c.Usable, Wait: c.Wait, Attempt: attempt,
		Timeout: AttemptTimeout(cfg.TTL), Faults: c.Faults, Cfg: cfg, c: c,
	}
}

// Failed returns the error of an attempt that failed with err while doing
// what ("acquiring"): one matching dlock.ErrNotObtained and the context
// error behind err, if ctx ended or err says so (see Cancelled);
// otherwise err, as the Client's Dialect describes it. An err that is
// the database's own failure to answer (see serverFault), which ctx's
// end cannot have caused, is kept in the error, matching too: the
// goroutine that got it may run after the end of ctx that it beat, and
// Lock counts the database unavailable all the same.
func (l *Locker) Failed(ctx context.Context, what string, err error) error {
	cause := Cancelled(ctx, err)
	switch {
	case cause == nil:
		// ctx had not ended: the failure is not its doing, whenever Lock
		// looks at it (see fault).
		return &beforeEndError{l.c.Describe(what, l.Name, err)}
	case l.unavailable(err) && l.serverFault(err):
		return &cutShortError{cause: cause, fault: l.c.Describe(what, l.Name, err)}
	}
	return dlock.NotObtained(cause)
}

// A beforeEndError is the error of an attempt that failed before its
// context ended (see Failed). It says no more than the error it wraps.
type beforeEndError struct{ error }

func (e *beforeEndError) Unwrap() error { return e.error }

// A cutShortError is the error of an attempt that the database failed,
// refusing or resetting its connection, as its ctx ended (see Failed): it
// matches dlock.ErrNotObtained, the context's error and the failure.
type cutShortError struct{ cause, fault error }

func (e *cutShortError) Error() string {
	return fmt.Sprintf("%v: %v (%v)", dlock.ErrNotObtained, e.cause, e.fault)
}

func (e *cutShortError) Unwrap() []error { return []error{dlock.ErrNotObtained, e.cause, e.fault} }

// serverFault reports whether err, an attempt's failure to reach the
// database or to get its answer, is the database's own (a connection
// refused, reset or closed by the server), not one that the end of the
// attempt's context may have caused: a timeout, a cancellation, a
// connection closed on this side, which the drivers do to interrupt a
// statement, or what the Faults' Interrupted says the driver returns then.
func (l *Locker) serverFault(err error) bool {
	var ne net.Error
	return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) &&
		!errors.Is(err, net.ErrClosed) && !(errors.As(err, &ne) && ne.Timeout()) &&
		!errors.Is(err, driver.ErrBadConn) && (l.Interrupted == nil || !l.Interrupted(err))
}

// tooSlow returns the error of an attempt whose grant, asked for at
// start, came too late to be a lease.
func (l *Locker) tooSlow(start time.Time) error {
	return dlock.NotObtained(fmt.Errorf("%s: acquiring %q took %v, longer than the TTL %v less the drift allowance",
		l.Pkg, l.Name, time.Since(start), l.Cfg.TTL))
}

// Faults are a dialect's reading of the errors of an attempt.
type Faults struct {
	// Pkg is the package's name, with which its error messages start.
	Pkg string

	// Transient reports whether err is a failure that a concurrent
	// statement caused, and that running the statement again at once
	// gets past: a serialization failure, a deadlock, a lock wait that
	// timed out. The statement did not run. An attempt so failing is made
	// again at once (see Again). Nil: none is.
	Transient func(error) bool

	// RowLocked reports whether an attempt's error says that it waited
	// for the lock's row, which another transaction held, until the
	// statement's lock wait ran out: the lock is held. Nil: none does.
	RowLocked func(error) bool

	// Unavailable reports whether an attempt's error says that the
	// database could not be reached, or could not answer, in a way that
	// heals: Lock waits through it. Nil: none does.
	Unavailable func(error) bool

	// Interrupted reports whether err, an unavailable one, may be what the
	// driver returns for a statement that the end of its context
	// interrupted, closing its connection or cancelling it on the server,
	// as well as for the database's own failure: once ctx has ended, Lock
	// does not count it as the database's (see Locker.Failed).
	// driver.ErrBadConn always is one. Nil: no other is.
	Interrupted func(error) bool

	// Service names the database, for dlock.UnavailableError.
	Service func() string
}

// A NoAnswerError is the error of an attempt that did not finish within
// its Timeout: the database did not answer, or answered its round trips
// too slowly. It matches no other error: the attempt's own was that its
// context, which the timeout ended, was done.
type NoAnswerError struct {
	Pkg, Name string
	After     time.Duration
}

func (e *NoAnswerError) Error() string {
	return fmt.Sprintf("%s: acquiring %q: the attempt did not finish within %v: the database does not answer, or answers too slowly", e.Pkg, e.Name, e.After)
}

// unavailable reports whether err, an attempt's, says that the database
// could not be reached or could not answer (see Faults.Unavailable).
func (l *Locker) unavailable(err error) bool {
	var na *NoAnswerError
	return err != nil && !errors.Is(err, dlock.ErrNotObtained) &&
		(errors.As(err, &na) || l.Unavailable != nil && l.Unavailable(err))
}

// fault returns the failure of an attempt that failed with err, if it
// found the database unavailable, or nil. Once ctx has ended, only the
// database's own failure counts (see serverFault), which may have come
// just before the end, and that of an attempt whose ctx ended as the
// database failed it (see Failed); not a timeout, a cancellation or a
// connection closed on this side, which the end of ctx may have caused.
func (l *Locker) fault(ctx context.Context, err error) error {
	var cs *cutShortError
	var na *NoAnswerError
	var be *beforeEndError
	switch {
	case errors.As(err, &cs):
		return cs.fault
	case !l.unavailable(err):
		return nil
	case !ended(ctx) || errors.As(err, &na) || errors.As(err, &be) || l.serverFault(err):
		return err
	}
	return nil
}

// down returns the error of a call whose attempts found the database
// unavailable since since, the last with err.
func (l *Locker) down(since time.Time, err error) error { return l.Faults.Down(since, err) }

// Down returns the error of a call that found the database unavailable
// since since, the last failure err: a *dlock.UnavailableError naming the
// Service.
func (f Faults) Down(since time.Time, err error) error {
	service := f.Pkg
	if f.Service != nil {
		service = f.Service()
	}
	return dlock.Unavailable(service, since, err)
}

// TryLock makes one attempt to take the lock. It returns an error matching
// dlock.ErrNotObtained if another owner holds it, and one matching
// dlock.ErrUnavailable, within Timeout, if the database cannot be reached
// or does not answer.
func (l *Locker) TryLock(ctx context.Context) (dlock.Lease, error) {
	a := l.Events.Begin(ctx)
	return a.End(l.Held.Call(ctx, l.tryLock))
}

func (l *Locker) tryLock(ctx context.Context) (dlock.Lease, error) {
	if err := l.check(ctx); err != nil {
		return nil, err
	}
	start := time.Now()
	got, _, err := l.attempt(ctx, 0)
	switch {
	case got == nil && err == nil:
		err = dlock.ErrNotObtained
	case l.fault(ctx, err) != nil:
		err = l.down(start, err)
	}
	return got, err
}

// Lock takes the lock, waiting until it is free, ctx is done or the retry
// strategy gives up, through failures to reach the database. If ctx is
// done first, the error matches both dlock.ErrNotObtained and ctx.Err(),
// and dlock.ErrUnavailable too if the last attempt found the database
// unavailable. If the Client is closed, it matches dlock.ErrNotObtained
// and ErrClosed.
func (l *Locker) Lock(ctx context.Context) (dlock.Lease, error) {
	a := l.Events.Begin(ctx)
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
	if err := l.usable(); err != nil {
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

// usable returns the error of a Lock or TryLock on an unusable Client: the
// Client's own if it was made with bad arguments, or, once it is closed,
// one that matches both its ErrClosed and dlock.ErrNotObtained.
func (l *Locker) usable() error {
	err := l.Usable()
	if err != nil && l.Held.Closed() {
		return dlock.NotObtained(err)
	}
	return err
}

// outage is what a Lock's attempts have found of the database: since when
// they have failed to reach it, the last with err; nil err once one got
// an answer.
type outage struct {
	since time.Time
	err   error
}

func (o *outage) failed(start time.Time, err error) {
	if o.err == nil {
		o.since = start
	}
	o.err = err
}

// wait tries once; if the lock is held, it waits for a release, for the
// holder's claim to run out, or for the retry strategy's backoff,
// whichever comes first, and tries again, until it obtains the lock, ctx
// is done, or the strategy gives up. While the server can wait for the
// release (see Busy), the backoff is spent in the next attempt, there.
// An attempt that finds the database unavailable counts as one that
// found the lock held, waiting out the backoff; any other error ends the
// wait.
func (l *Locker) wait(ctx context.Context, a *lease.Attempt) (dlock.Lease, error) {
	var (
		down  outage
		w     *Waiter
		idle  pause.Timer
		block time.Duration
	)
	defer idle.Stop()
	defer func() {
		if w != nil {
			w.Close()
		}
	}()
	for n := 0; ; {
		start := time.Now()
		got, left, err := l.attempt(ctx, block)
		block = 0
		switch fault := l.fault(ctx, err); {
		case got != nil:
			return got, nil
		case fault != nil:
			// Counted even if ctx has ended meanwhile: the database
			// failed this attempt before, and may have failed no other
			// since it went.
			down.failed(start, fault)
			if ended(ctx) {
				return nil, l.interrupted(ctx, err, down)
			}
		case ended(ctx):
			// Before the outage is forgotten: an attempt that its
			// deadline ended, before ctx's timer ran, says ErrNotObtained,
			// and the database did not answer it.
			return nil, l.interrupted(ctx, err, down)
		case err == nil || errors.Is(err, dlock.ErrNotObtained):
			down = outage{} // the database answered
		default:
			return nil, err
		}
		if w == nil {
			a.Waiting()
			w = l.Wait(l.Name)
			if down.err == nil {
				// Try again at once: a release may have come between the
				// first attempt and the waiter's registration.
				continue
			}
		}
		n++
		wait, ok := l.Retry.Backoff(n)
		switch {
		case !ok && down.err != nil:
			return nil, dlock.NotObtained(l.down(down.since, down.err))
		case !ok && err != nil:
			return nil, err
		case !ok:
			return nil, dlock.ErrNotObtained
		case down.err != nil:
		case left == Busy: // wait on the server, for its release
			block = wait
			continue
		case left > 0 && left < wait: // the holder's lease runs out first
			wait = left
		}
		if !idle.Wait(ctx, w.c, wait) {
			return nil, l.interrupted(ctx, err, down)
		}
		if err := l.usable(); err != nil {
			return nil, err
		}
	}
}

// interrupted returns the error of a Lock whose ctx ended while it
// waited: it matches dlock.ErrNotObtained and why ctx ended (see
// stopped); and also
// dlock.ErrUnavailable, naming the database, if the last attempt found it
// unavailable; or says that the last attempt's grant was too short.
func (l *Locker) interrupted(ctx context.Context, last error, down outage) error {
	cause := l.stopped(ctx)
	if down.err != nil {
		return fmt.Errorf("%w: %w (%w)", dlock.ErrNotObtained, cause, l.down(down.since, down.err))
	}
	return lease.Interrupted(cause, last)
}

// stopped returns why ctx, a Lock's, is done: the Client's ErrClosed if
// Close ended it; ctx.Err() and ErrClosed if ctx ended as Close began;
// ctx.Err() otherwise.
func (l *Locker) stopped(ctx context.Context) error {
	err := ctx.Err()
	if err == nil {
		err = context.DeadlineExceeded // its deadline passed; its timer has yet to run (see ended)
	}
	if !l.Held.Closed() {
		return err
	}
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return cause
	}
	return fmt.Errorf("%w (%w)", err, l.Usable())
}

// ended reports whether ctx has ended, or its deadline has passed.
func ended(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

// Cancelled returns the context error behind a failed call, or nil: ctx's
// own, or the one err wraps.
func Cancelled(ctx context.Context, err error) error {
	if e := ctx.Err(); e != nil {
		return e
	}
	if ended(ctx) {
		// Its deadline has passed, and the timer that ends it has yet to
		// run: what a statement under it met may be its doing (the
		// dialer's own timer, with the same deadline, may have run).
		return context.DeadlineExceeded
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return context.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		return context.Canceled
	}
	return nil
}
