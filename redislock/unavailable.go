package redislock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/lease"
	"github.com/dlock-go/dlock/internal/redisscript"
)

// AttemptTimeout bounds each call that Lock, TryLock, Release, Inspect and
// ForceUnlock make to the server, whatever their context says: a server
// that has not answered a call within it is unavailable, as one that
// refused the connection is. TryLock on an unavailable server returns
// within AttemptTimeout (plus WithReplicas' timeout, when given) an error
// matching dlock.ErrUnavailable; Lock counts the call as failed and tries
// again. The bound holds for rueidis clients, and for go-redis clients with
// ContextTimeoutEnabled, as goredisconn recommends; without it, go-redis
// bounds a call by its ReadTimeout instead.
const AttemptTimeout = time.Second

// bound returns ctx bounded by AttemptTimeout plus extra, and whether that
// bound comes before ctx's own deadline: a call that times out on it met an
// unavailable server, not the caller's deadline.
func bound(ctx context.Context, extra time.Duration) (context.Context, context.CancelFunc, bool) {
	limit := time.Now().Add(AttemptTimeout + extra)
	if d, ok := ctx.Deadline(); ok && !d.After(limit) {
		return ctx, func() {}, false
	}
	ctx, cancel := context.WithDeadline(ctx, limit)
	return ctx, cancel, true
}

// failed returns the error of an attempt whose call, sent at start with
// ctx (bounded by bound, own), failed with err: one matching
// dlock.ErrNotObtained and the context's error if ctx ended first (a
// *cutShort); a *dlock.UnavailableError if the server could not be reached
// or could not answer (see redisscript.Transient) in time; otherwise the
// error, described. A failure that is the server's own (refused, reset),
// not ctx's end, makes the server unavailable even if ctx has ended since:
// the goroutine that got it may run after the deadline that it beat.
func (c *Client) failed(ctx context.Context, own bool, start time.Time, key string, s *redisscript.Script, err error) error {
	if cause := ended(ctx, own, err); cause != nil && !serverFailed(err) {
		return &cutShort{start: start, cause: cause, err: describe(key, s, err)}
	}
	d := describe(key, s, err)
	if redisscript.Transient(err) || own && timedOut(err) {
		return c.unavailable(start, d)
	}
	return d
}

// ended returns the caller's context error behind a failed call, or nil:
// as cancelled does, except that when the call had a bound of its own
// (own), a deadline error is that bound's, unless ctx has ended too.
func ended(ctx context.Context, own bool, err error) error {
	if !own {
		return cancelled(ctx, err)
	}
	if e := ctx.Err(); e != nil {
		return e
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// serverFailed reports whether err, a call's failure, is the server's own
// that waiting can heal (a connection refused or reset): not the end of
// the call's context, a timeout, or a connection closed on this side.
func serverFailed(err error) bool {
	return redisscript.Transient(err) && !redisscript.IsReply(err) && !timedOut(err) &&
		!errors.Is(err, context.Canceled) && !errors.Is(err, net.ErrClosed)
}

// timedOut reports whether err is a call that ran out of time.
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// unavailable returns the *dlock.UnavailableError of the server, failing
// since since, with err the last failure.
func (c *Client) unavailable(since time.Time, err error) error {
	return dlock.Unavailable(c.service, since, err)
}

// releaseFailed returns the error of a release of the lock on key, a
// call of s sent at start that failed with err. A release that could not
// reach the server, got no answer in time or was turned away (see
// redisscript.Transient) matches dlock.ErrUnavailable, and the context's
// error if ctx ended first; the caller has sent it again in the background
// if it may have run or was turned away (see unfinished), and the lock
// otherwise expires within its TTL. Any other failure is described.
func (c *Client) releaseFailed(start time.Time, key string, s *redisscript.Script, err error) error {
	d := describe(key, s, err)
	switch {
	case !redisscript.Transient(err):
		return d
	case unfinished(err):
		return fmt.Errorf("redislock: release of %q did not reach the server or was turned away (retried in the background until the Client closes; at worst the lock expires within its TTL): %w",
			key, c.unavailable(start, d))
	default: // no connection could be made: the release did not run
		return fmt.Errorf("redislock: release of %q could not reach the server (the lock expires within its TTL): %w", key, c.unavailable(start, d))
	}
}

// A cutShort is the error of an attempt whose call the caller's context
// ended before the server answered. It matches dlock.ErrNotObtained and
// the context's error: Lock returns it as any wait that its context ended.
// TryLock returns an error matching dlock.ErrUnavailable and the
// context's error instead (see tryFailed): nobody knows whether the lock is
// held.
type cutShort struct {
	start time.Time
	cause error // the context's error
	err   error // the call's, described
}

func (e *cutShort) Error() string { return dlock.NotObtained(e.cause).Error() }

func (e *cutShort) Unwrap() []error { return []error{dlock.ErrNotObtained, e.cause} }

// tryFailed returns the error TryLock returns for err, its attempt's
// error: that of a call cut short by ctx becomes an error matching
// dlock.ErrUnavailable and ctx's error, not dlock.ErrNotObtained.
func (c *Client) tryFailed(err error) error {
	var cut *cutShort
	if errors.As(err, &cut) {
		return c.unavailable(cut.start, fmt.Errorf("%w (no answer before the context ended: %w)", cut.err, cut.cause))
	}
	return err
}

// An outage follows the attempts of one Lock: since when they have failed
// for want of the server (the first of the *dlock.UnavailableError in a
// row), and the last failure.
type outage struct {
	since time.Time
	last  error // nil while the server answers
}

// note records the outcome of an attempt: a failure for want of the
// server starts or continues the outage; an answer (a lease, or a lock
// found held) ends it; a call cut short by ctx changes nothing.
func (o *outage) note(err error) {
	var u *dlock.UnavailableError
	var cut *cutShort
	switch {
	case errors.As(err, &u):
		if o.last == nil {
			o.since = u.Since
		}
		o.last = u.Err
	case errors.As(err, &cut):
	default:
		o.last = nil
	}
}

// interrupted returns the error of a Lock whose ctx ended with cause while
// it waited: not obtained, for cause, and, while the server failed, also
// unavailable; why is the last attempt's error (see lease.Interrupted).
func (o *outage) interrupted(c *Client, cause, why error) error {
	if o.last == nil {
		return lease.Interrupted(cause, why)
	}
	return fmt.Errorf("%w: %w: %w", dlock.ErrNotObtained, cause, c.unavailable(o.since, o.last))
}

// gaveUp returns the error of a Lock whose retry strategy gave up after
// an attempt that failed with why: it matches dlock.ErrNotObtained, and
// why.
func gaveUp(why error) error {
	if why == nil {
		return dlock.ErrNotObtained
	}
	if errors.Is(why, dlock.ErrNotObtained) {
		return why
	}
	return dlock.NotObtained(why)
}

// service names the Redis deployment of conn in errors: its address, if
// the Conn says (see goredisconn and rueidisconn).
func service(conn Conn) string {
	if s, ok := conn.(interface{ Service() string }); ok && s.Service() != "" {
		return s.Service()
	}
	if a, ok := conn.(interface{ Addr() string }); ok && a.Addr() != "" {
		return "redis " + a.Addr()
	}
	return "redis"
}
