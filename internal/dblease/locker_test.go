package dblease

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

var errTestClosed = errors.New("test: client closed")

// newTestLocker returns a Locker of Client c whose attempts are made by
// attempt.
func newTestLocker(c *Client, attempt AttemptFunc) *Locker {
	l := c.NewLocker("l", "Mutex", false, NewConfig(time.Minute, dlock.ExponentialBackoff(time.Millisecond, 4*time.Millisecond)), nil, attempt)
	l.Timeout = MinAttemptTimeout
	return l
}

func testClient() *Client {
	return New(Dialect{
		Faults: Faults{Pkg: "test"}, ErrClosed: errTestClosed, ErrSessionLost: errors.New("test: session lost"),
		Release:       func(context.Context, string, string) (bool, error) { return true, nil },
		IsServerError: func(error) bool { return true },
		Describe:      func(what, name string, err error) error { return fmt.Errorf("test: %s %q: %w", what, name, err) },
		MaxFence:      1<<53 - 1,
	}, ClientConfig{}, nil)
}

// A grant that comes as Close begins, to a Lock whose ctx ends at the same
// time (a program stopping: it cancels its wait and closes its Client),
// is given back, and Lock's error matches both dlock.ErrNotObtained and
// ErrClosed: never a bare ErrClosed, which matches neither ErrNotObtained
// nor ctx.Err().
func TestGrantAsCloseBegins(t *testing.T) {
	for _, try := range []bool{false, true} {
		c := testClient()
		ctx, cancel := context.WithCancel(context.Background())
		l := newTestLocker(c, func(actx context.Context, _ time.Duration) (dlock.Lease, time.Duration, error) {
			g := NewGrant(actx, c, nil, "l", "token", 1, time.Now().Add(time.Minute), NewConfig(time.Minute, dlock.NoRetry()))
			cancel()
			go c.Close(nil) // waits for this call to end
			for !c.Grants.Closed() {
				time.Sleep(time.Millisecond)
			}
			if err := g.Keep(actx); err != nil {
				return nil, 0, err
			}
			return g, 0, nil
		})
		call := l.Lock
		if try {
			call = l.TryLock
		}
		got, err := call(ctx)
		if got != nil || !errors.Is(err, dlock.ErrNotObtained) || !errors.Is(err, errTestClosed) {
			t.Errorf("try %v: a grant as Close began = %v, %v; want an error matching ErrNotObtained and ErrClosed", try, got, err)
		}
	}
}

// fault is an attempt's error that the test's Faults call unavailable.
var fault = errors.New("test: connection refused")

// Lock waits through attempts that find the database unavailable; when
// its ctx ends while they still do, its error matches ErrNotObtained,
// ctx.Err() and ErrUnavailable, which names the service and the last
// failure; TryLock's matches ErrUnavailable and not ErrNotObtained; an
// error that is neither ends Lock at once.
func TestLockWaitsThroughFaults(t *testing.T) {
	c := testClient()
	defer c.Close(nil)
	failing := 3
	var tries int
	l := newTestLocker(c, func(ctx context.Context, _ time.Duration) (dlock.Lease, time.Duration, error) {
		tries++
		if tries <= failing {
			return nil, 0, fault
		}
		return NewGrant(ctx, c, nil, "l", "token", 1, time.Now().Add(time.Minute), NewConfig(time.Minute, dlock.NoRetry())), 0, nil
	})
	l.Unavailable = func(err error) bool { return errors.Is(err, fault) }
	l.Service = func() string { return "test 127.0.0.1:1" }
	ctx := context.Background()
	if got, err := l.Lock(ctx); err != nil || got == nil {
		t.Fatalf("Lock through %d unavailable attempts = %v, %v; want the lease", failing, got, err)
	}

	tries, failing = 0, 1<<30
	_, err := l.TryLock(ctx)
	var u *dlock.UnavailableError
	if !errors.As(err, &u) || u.Service != "test 127.0.0.1:1" || !errors.Is(err, fault) || errors.Is(err, dlock.ErrNotObtained) {
		t.Errorf("TryLock on an unavailable database = %v; want an *UnavailableError naming the service, wrapping the fault, not ErrNotObtained", err)
	}

	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = l.Lock(short)
	if !errors.Is(err, dlock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, dlock.ErrUnavailable) || !errors.Is(err, fault) {
		t.Errorf("Lock whose ctx ends while the database is unavailable = %v; want ErrNotObtained, DeadlineExceeded, ErrUnavailable and the fault", err)
	}
	if tries < 3 {
		t.Errorf("Lock made %d attempts in 50ms with a backoff of at most 4ms; want it to keep trying", tries)
	}

	l.Retry = dlock.MaxAttempts(dlock.ExponentialBackoff(time.Millisecond, 4*time.Millisecond), 3)
	if _, err = l.Lock(ctx); !errors.Is(err, dlock.ErrNotObtained) || !errors.Is(err, dlock.ErrUnavailable) {
		t.Errorf("Lock whose retry strategy gives up while the database is unavailable = %v; want ErrNotObtained and ErrUnavailable", err)
	}

	hard := errors.New("test: permission denied")
	tries, failing = 0, 0
	l.Attempt = func(context.Context, time.Duration) (dlock.Lease, time.Duration, error) { tries++; return nil, 0, hard }
	if _, err := l.Lock(ctx); !errors.Is(err, hard) || errors.Is(err, dlock.ErrUnavailable) || tries != 1 {
		t.Errorf("Lock on a hard error = %v after %d attempts; want that error after 1", err, tries)
	}
}

// A Lock whose ctx ends as the attempt that first finds the database
// gone fails (its failure in flight: the goroutine that got it runs after
// the deadline it beat) says ErrUnavailable all the same, whether the end
// comes before the attempt reads its failure (Failed) or after, before
// Lock does; a failure that the end of ctx may have caused (a timeout, a
// cancellation, a connection closed on this side) does not. Lock used to
// look at ctx first, and said only ErrNotObtained and ctx.Err(): the
// database was gone, and the caller was sent to look for a holder.
func TestLockCutShortByFault(t *testing.T) {
	for _, tc := range []struct {
		name        string
		before      bool  // ctx ends before the attempt reads its failure
		err         error // the attempt's failure
		unavailable bool
	}{
		{"after", false, fault, true},
		{"before", true, fault, true},
		{"timeout", true, os.ErrDeadlineExceeded, false},
		{"closed here", true, fmt.Errorf("read: %w", errClosedHere), false},
		{"cancelled", true, context.Canceled, false},
		// What a driver returns for a statement it interrupted, closing
		// its connection, as for a connection the server reset: counted
		// only if it came before the end.
		{"bad conn", true, fmt.Errorf("read: %w", driver.ErrBadConn), false},
		{"bad conn after", false, fmt.Errorf("read: %w", driver.ErrBadConn), true},
		{"interrupted", true, errInterrupted, false},
		{"interrupted after", false, errInterrupted, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testClient()
			defer c.Close(nil)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			tries := 0
			var l *Locker
			l = newTestLocker(c, func(actx context.Context, _ time.Duration) (dlock.Lease, time.Duration, error) {
				tries++
				if tries == 1 {
					return nil, 0, nil // held
				}
				if tc.before {
					cancel()
					return nil, 0, l.Failed(actx, "acquiring", tc.err)
				}
				err := l.Failed(actx, "acquiring", tc.err)
				cancel()
				return nil, 0, err
			})
			l.Unavailable = func(err error) bool {
				return errors.Is(err, fault) || errors.Is(err, errClosedHere) || errors.Is(err, os.ErrDeadlineExceeded) ||
					errors.Is(err, driver.ErrBadConn) || errors.Is(err, errInterrupted)
			}
			l.Interrupted = func(err error) bool { return errors.Is(err, errInterrupted) }
			_, err := l.Lock(ctx)
			if !errors.Is(err, dlock.ErrNotObtained) || !errors.Is(err, context.Canceled) || errors.Is(err, dlock.ErrUnavailable) != tc.unavailable {
				t.Errorf("Lock whose ctx ended as its attempt failed with %v = %v; want ErrNotObtained, Canceled and, %v, ErrUnavailable", tc.err, err, tc.unavailable)
			}
		})
	}
}

// errInterrupted is an error that the Faults' Interrupted names.
var errInterrupted = errors.New("test: invalid connection")

// A Lock whose ctx's deadline has passed, before the timer that ends ctx
// has run, and whose attempt meets a timeout then (a dial's: the dialer
// sets a timer of its own for the same deadline, which may run first) does
// not say ErrUnavailable: the database did not fail. It used to, when ctx
// ended before Lock looked again (mysqllock, dialing with a deadline of
// 0-8ms: 24 of 400 Locks and TryLocks on a healthy server).
func TestLockDeadlinePassed(t *testing.T) {
	timeout := &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}
	for _, try := range []bool{false, true} {
		c := testClient()
		ctx, cancel := context.WithCancel(context.Background())
		var l *Locker
		l = newTestLocker(c, func(actx context.Context, _ time.Duration) (dlock.Lease, time.Duration, error) {
			err := l.Failed(passed{actx}, "connecting to take", timeout)
			cancel() // the timer runs
			return nil, 0, err
		})
		l.Unavailable = func(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }
		var err error
		if try {
			_, err = l.TryLock(ctx)
		} else {
			_, err = l.Lock(ctx)
		}
		if errors.Is(err, dlock.ErrUnavailable) || !errors.Is(err, dlock.ErrNotObtained) {
			t.Errorf("Lock (TryLock: %v) whose attempt timed out as its deadline passed = %v; want ErrNotObtained, not ErrUnavailable", try, err)
		}
		c.Close(nil)
	}
}

// An attempt whose own Timeout passes as its statement times out (the
// driver's timer, set for the attempt's deadline, may run before the
// attempt context's) is one the database did not answer: TryLock says
// ErrUnavailable, not that the lock is held.
func TestAttemptTimeoutBeforeItsTimer(t *testing.T) {
	timeout := &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}
	for i := range 50 {
		c := testClient()
		var l *Locker
		l = newTestLocker(c, func(actx context.Context, _ time.Duration) (dlock.Lease, time.Duration, error) {
			d, _ := actx.Deadline()
			time.Sleep(time.Until(d))
			return nil, 0, l.Failed(actx, "connecting to take", timeout)
		})
		l.Timeout = time.Millisecond
		l.Unavailable = func(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }
		_, err := l.TryLock(context.Background())
		c.Close(nil)
		if !errors.Is(err, dlock.ErrUnavailable) || errors.Is(err, dlock.ErrNotObtained) {
			t.Fatalf("try %d: TryLock whose attempt timed out = %v; want ErrUnavailable, not ErrNotObtained", i, err)
		}
	}
}

// A Lock whose attempts find the database gone, the last one timing out
// as ctx's deadline passes, before ctx's timer runs, still says
// ErrUnavailable: that attempt, which says ErrNotObtained, is not an
// answer of the database that ends the outage. (The conformance suite's
// LockWaitingWhenServersGo/Refused, mysqllock session mode, failed so
// under a load of 30.)
func TestLockOutageToItsDeadline(t *testing.T) {
	timeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	c := testClient()
	defer c.Close(nil)
	inner, cancel := context.WithCancel(context.Background())
	defer cancel()
	ctx := &late{Context: inner}
	tries := 0
	var l *Locker
	l = newTestLocker(c, func(actx context.Context, _ time.Duration) (dlock.Lease, time.Duration, error) {
		tries++
		switch tries {
		case 1:
			return nil, 0, nil // held
		case 2, 3:
			return nil, 0, l.Failed(actx, "acquiring", fault)
		case 4:
			ctx.passed.Store(true) // the deadline passes; its timer has yet to run
			return nil, 0, l.Failed(passed{actx}, "acquiring", timeout)
		}
		cancel() // the timer runs
		return nil, 0, l.Failed(actx, "acquiring", context.Canceled)
	})
	l.Unavailable = func(err error) bool { return errors.Is(err, fault) || errors.Is(err, os.ErrDeadlineExceeded) }
	_, err := l.Lock(ctx)
	if !errors.Is(err, dlock.ErrUnavailable) || !errors.Is(err, dlock.ErrNotObtained) {
		t.Errorf("Lock whose attempts found the database gone until its deadline = %v (%d attempts); want ErrNotObtained and ErrUnavailable", err, tries)
	}
}

// late is a context whose deadline, once passed is set, has passed, and
// whose timer has not run.
type late struct {
	context.Context
	passed atomic.Bool
}

func (c *late) Deadline() (time.Time, bool) {
	if c.passed.Load() {
		return time.Now().Add(-time.Millisecond), true
	}
	return time.Time{}, false
}

// passed is a context whose deadline has passed, and whose timer has not
// run yet.
type passed struct{ context.Context }

func (passed) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }

// errClosedHere is net.ErrClosed: a connection closed on this side.
var errClosedHere = net.ErrClosed

// An attempt that does not answer within its Timeout is given up: Lock
// counts it as unavailable, and TryLock returns within the Timeout.
func TestAttemptTimeout(t *testing.T) {
	c := testClient()
	defer c.Close(nil)
	l := newTestLocker(c, func(ctx context.Context, _ time.Duration) (dlock.Lease, time.Duration, error) {
		<-ctx.Done() // a database that does not answer
		return nil, 0, dlock.NotObtained(ctx.Err())
	})
	l.Timeout = 100 * time.Millisecond
	start := time.Now()
	_, err := l.TryLock(context.Background())
	var na *NoAnswerError
	if took := time.Since(start); !errors.Is(err, dlock.ErrUnavailable) || !errors.As(err, &na) || errors.Is(err, dlock.ErrNotObtained) || took > time.Second {
		t.Errorf("TryLock of a database that does not answer = %v after %v; want ErrUnavailable (no answer) within 100ms", err, took)
	}
}

func TestAttemptTimeoutBounds(t *testing.T) {
	for _, tc := range []struct{ ttl, want time.Duration }{
		{10 * time.Millisecond, 2 * time.Second},
		{3 * time.Second, 3 * time.Second},
		{30 * time.Second, 5 * time.Second},
	} {
		if got := AttemptTimeout(tc.ttl); got != tc.want {
			t.Errorf("AttemptTimeout(%v) = %v; want %v", tc.ttl, got, tc.want)
		}
	}
}

func TestLookTimeout(t *testing.T) {
	for n, want := range []time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 4: 8 * time.Second, 5: 8 * time.Second, 30: 8 * time.Second} {
		if want == 0 {
			continue
		}
		if got := lookTimeout(n); got != want {
			t.Errorf("lookTimeout(%d) = %v; want %v", n, got, want)
		}
	}
}
