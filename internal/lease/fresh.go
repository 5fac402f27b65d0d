package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlock-go/dlock"
)

// MinValidity returns the least time a lease of a lock whose lease time is
// ttl has left when Lock or TryLock returns it: a third of ttl (see
// dlock.Locker).
func MinValidity(ttl time.Duration) time.Duration { return ttl / 3 }

// Fresh makes sure that l, a lease just granted by a lock whose lease time
// is ttl, has at least MinValidity(ttl) left before Lock or TryLock
// returns it. A grant can arrive short: a server that stopped between a
// request and its answer answers late, and the lease's Until counts from
// the request. If l is short, Fresh refreshes it once, giving the refresh
// half of what is left (its Until then counts from the refresh); if it is
// still short, or the refresh failed, Fresh releases it, beginning before
// Until so that the release reaches the server, and returns an error that
// matches dlock.ErrNotObtained (and ctx.Err(), if ctx has ended) and says
// how much of the lease was left: the attempt failed, and Lock may try
// again. A lease cut short by its WithMaxHold cap is not short: its holder
// asked for it.
//
// Backends call Fresh once the lease is registered with its client, as
// they would return it: Refresh and Release must work as on any lease. Its
// events go nowhere yet (see Attempt.End), so a lease given back reports
// none.
func Fresh(ctx context.Context, l dlock.Lease, ttl time.Duration) error {
	if !short(l, ttl) {
		return nil
	}
	left := time.Until(l.Until())
	// The refresh has half of what is left: the release must begin before
	// Until, or it would find the lease ended and leave the lock to
	// expire on the server.
	rctx, cancel := context.WithTimeout(ctx, left/2)
	err := l.Refresh(rctx)
	cancel()
	if err == nil && !short(l, ttl) {
		return nil
	}
	// Bounded, and whatever ctx says: a lease that cannot be released
	// here is given back in the background by its backend, or expires.
	rctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), max(2*ttl, time.Second))
	l.Release(rctx)
	cancel()
	return &shortGrantError{key: l.Key(), left: left, ttl: ttl, refresh: err, cause: ctx.Err()}
}

// short reports whether l has less than MinValidity(ttl) left, and is not
// at its WithMaxHold cap.
func short(l dlock.Lease, ttl time.Duration) bool {
	until := l.Until()
	if time.Until(until) >= MinValidity(ttl) {
		return false
	}
	if s, ok := l.(interface{ state() *State }); ok && s.state().atCap(until) {
		return false
	}
	return true
}

// A shortGrantError is the reason of an attempt whose grant arrived with
// less than MinValidity of its lease left and was given back.
type shortGrantError struct {
	key     string
	left    time.Duration // at the grant
	ttl     time.Duration
	refresh error // the refresh's error, or nil if it succeeded but left the lease short
	cause   error // ctx.Err(), if the caller's context had ended
}

func (e *shortGrantError) Error() string {
	s := fmt.Sprintf("dlock: %q was granted with only %v of its %v lease left (less than the third a grant must have); given back",
		e.key, max(e.left, 0).Round(time.Millisecond), e.ttl)
	if e.refresh != nil {
		s += " after a refresh failed: " + e.refresh.Error()
	}
	return s
}

// Unwrap returns dlock.ErrNotObtained, and the context's error if the
// caller's context had ended: a cancelled attempt matches both.
func (e *shortGrantError) Unwrap() []error {
	if e.cause != nil {
		return []error{dlock.ErrNotObtained, e.cause}
	}
	return []error{dlock.ErrNotObtained}
}

// IsShort reports whether err says that an attempt's grant was given back
// by Fresh.
func IsShort(err error) bool {
	var sg *shortGrantError
	return errors.As(err, &sg)
}

// Interrupted returns the error of a Lock whose ctx ended (cause is
// ctx.Err()) while it waited: one that matches dlock.ErrNotObtained and
// cause, and also last, the error of the last attempt, if that attempt
// was granted too short a lease (see Fresh).
func Interrupted(cause, last error) error {
	var sg *shortGrantError
	if errors.As(last, &sg) {
		return fmt.Errorf("%w: %w (the last attempt: %w)", dlock.ErrNotObtained, cause, sg)
	}
	return dlock.NotObtained(cause)
}
