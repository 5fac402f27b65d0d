// Package granttest checks, against a real server, the minimum validity
// at grant (see lease.Fresh): a grant whose answer arrives with little of
// its lease left is refreshed or given back, never returned short.
package granttest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// A Case is one backend's setup.
type Case struct {
	// Slow is a lock whose client reaches every server through a proxy
	// that Delay slows down; its lease time is TTL. Fast is the same lock,
	// through a client that reaches the servers directly.
	Slow, Fast dlock.Locker
	TTL        time.Duration
	// Delay delays every chunk of data the proxies forward, in either
	// direction, by d (testenv.Proxy.SetLatency).
	Delay func(d time.Duration)
}

// slack is what the check leaves to the scheduler between the return of a
// grant and the look at its Until, on a loaded machine.
const slack = 100 * time.Millisecond

// Check delays the replies more and more, until a grant takes most of its
// lease to arrive, and checks that TryLock then either fails with an error
// matching dlock.ErrNotObtained (or, from a backend that bounds its
// attempts, dlock.ErrUnavailable) or returns a lease with at least a third
// of its lease left, and that a lease given back leaves the lock free for
// the next client within a TTL. Then it checks that Lock, through the same
// delay, returns such a lease too or fails as a cancelled wait when its
// ctx ends.
//
// The delay is raised from the cost measured, never assumed: a loaded
// machine only makes a grant dearer, and a grant that arrives expired is
// refused without a lease, which the check accepts too.
func Check(t *testing.T, c Case) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	defer c.Delay(0)

	// What a grant has left with no delay: the lease time (a ZooKeeper
	// lock's may be shorter than the TTL) less the drift allowance and
	// the round trips.
	l, err := c.Slow.TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock with no delay: %v", err)
	}
	full := time.Until(l.Until())
	release(t, ctx, l)

	// Raise the delay until a grant costs 85% of its lease: how many
	// delays a grant costs depends on the backend (one round trip for a
	// script, more for a transaction or a quorum's rounds) and, as the
	// proxy forwards a connection's chunks one after another, on the
	// delay itself.
	delay := c.TTL / 50
	for try := 1; ; try++ {
		c.Delay(delay)
		l, err := c.Slow.TryLock(ctx)
		c.Delay(0)
		if err != nil {
			refused(t, ctx, c, err)
			break
		}
		left := time.Until(l.Until())
		release(t, ctx, l)
		t.Logf("TryLock through a %v delay returned a lease with %v left", delay, left)
		if left < full/3-slack {
			t.Fatalf("TryLock returned a lease with %v left of the %v a grant has; want at least a third", left.Round(time.Millisecond), full.Round(time.Millisecond))
		}
		if try == 20 {
			t.Fatalf("no grant came short through delays up to %v: the check could not run", delay)
		}
		// At most 40% more each time, so that a cost that grows faster
		// than the delay does not jump past the lease.
		grow := min(float64(full*85/100)/float64(max(full-left, delay)), 1.4)
		delay = time.Duration(float64(delay) * grow)
	}

	c.Delay(delay)
	lctx, lcancel := context.WithTimeout(ctx, 3*c.TTL)
	l, err = c.Slow.Lock(lctx)
	lcancel()
	c.Delay(0)
	switch {
	case err == nil:
		if left := time.Until(l.Until()); left < full/3-slack {
			t.Errorf("Lock returned a lease with %v left of the %v a grant has; want at least a third", left.Round(time.Millisecond), full.Round(time.Millisecond))
		}
		release(t, ctx, l)
	case !errors.Is(err, dlock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded):
		t.Errorf("Lock of slow grants past its deadline = %v; want ErrNotObtained and DeadlineExceeded", err)
	default:
		t.Logf("Lock: %v", err)
	}
}

// refused checks the error of a TryLock of a slow grant: one matching
// dlock.ErrNotObtained, or, from a backend whose attempts give up on
// servers slower than its bound, one matching dlock.ErrUnavailable and not
// ErrNotObtained (see dlock.Locker). Either way no lease was returned, and
// a grant given back, or abandoned, leaves the lock free within a TTL.
func refused(t *testing.T, ctx context.Context, c Case, err error) {
	t.Helper()
	unavailable := errors.Is(err, dlock.ErrUnavailable) && !errors.Is(err, dlock.ErrNotObtained)
	if !errors.Is(err, dlock.ErrNotObtained) && !unavailable {
		t.Fatalf("TryLock of a slow grant = %v; want an error matching ErrNotObtained, or ErrUnavailable", err)
	}
	t.Logf("TryLock: %v", err)
	if unavailable || strings.Contains(err.Error(), "given back") {
		// Given back at once, or in the background when a request in
		// flight on the slow link got in the way (a session-mode
		// confirmation that its deadline interrupts closes its
		// connection): either way, no holder is left behind.
		lctx, cancel := context.WithTimeout(ctx, c.TTL)
		defer cancel()
		if l, err := c.Fast.Lock(lctx); err != nil {
			t.Errorf("Lock by another client within the TTL after a grant given back: %v; want the lock free", err)
		} else {
			release(t, ctx, l)
		}
	}
}

func release(t *testing.T, ctx context.Context, l dlock.Lease) {
	t.Helper()
	if err := l.Release(ctx); err != nil {
		t.Errorf("Release: %v", err)
	}
}
