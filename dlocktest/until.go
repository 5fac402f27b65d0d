package dlocktest

import (
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// WaitDoneByUntil waits up to d for lease's Done to close, failing t if it
// does not, and then fails t unless Done closed by the lease's Until. It
// returns when it saw Done closed. It judges only what happens from its
// call on: a caller busy elsewhere while Until passes (restarting a
// server, say) starts watching first, with WatchDoneByUntil.
//
// A lease ends at Until by a timer of its own, and a loaded machine runs
// timers late: by a hundred milliseconds or more when other processes
// keep every CPU busy. So the check is not against the clock alone but
// against an ordinary timer due at the same instant, which follows Until
// as renewals move it: Done must close no more than Slack after that
// timer ran. Without load the two run together, and Done closing later
// than Until by more than Slack fails, as it should.
func WaitDoneByUntil(t testing.TB, lease dlock.Lease, d time.Duration, what string) time.Time {
	t.Helper()
	return WatchDoneByUntil(t, lease)(d, what)
}

// WatchDoneByUntil starts watching lease as WaitDoneByUntil does, and
// returns the function that waits for Done and judges it, as
// WaitDoneByUntil(t, lease, d, what) would have had it been called when
// WatchDoneByUntil was: the moment Done closed is taken as it happens, not
// when the caller gets round to looking. The watch ends when that
// function returns, or when t ends.
func WatchDoneByUntil(t testing.TB, lease dlock.Lease) func(d time.Duration, what string) time.Time {
	ran, stopFollowing := followUntil(lease)
	closedAt := make(chan time.Time, 1)
	// The timer's reports, kept as they come: the caller may look long
	// after they ran.
	var mu sync.Mutex
	var due, at time.Time
	seen := make(chan struct{}, 1)
	quit := make(chan struct{})
	var once sync.Once
	stop := func() { once.Do(func() { close(quit); stopFollowing() }) }
	t.Cleanup(stop)
	go func() {
		select {
		case <-lease.Done():
			closedAt <- time.Now()
		case <-quit:
		}
	}()
	go func() {
		for {
			select {
			case m := <-ran:
				// The first report of a due instant says when its timer
				// ran.
				mu.Lock()
				if !m[0].Equal(due) {
					due, at = m[0], m[1]
				}
				mu.Unlock()
				select {
				case seen <- struct{}{}:
				default:
				}
			case <-quit:
				return
			}
		}
	}()
	return func(d time.Duration, what string) time.Time {
		t.Helper()
		defer stop()
		var closed time.Time
		select {
		case closed = <-closedAt: // closed already: a select among ready cases picks at random
		default:
			select {
			case closed = <-closedAt:
			case <-time.After(d):
				t.Fatalf("Done not closed %v after %s", d, what)
				return time.Time{}
			}
		}
		until := lease.Until() // final: an ended lease's Until does not move
		wait := time.After(max(time.Until(until), 0) + d)
		for {
			mu.Lock()
			dueNow, atNow := due, at
			mu.Unlock()
			if dueNow.Equal(until) {
				late, timerLate := closed.Sub(until), max(atNow.Sub(dueNow), 0)
				if late > timerLate+Slack {
					t.Errorf("Done closed %v after Until, %v after a timer due at Until ran; want no later than that timer (and Slack %v)",
						late, late-timerLate, Slack)
				}
				t.Logf("Done closed %v after Until; a timer due then ran %v late", late, timerLate)
				return closed
			}
			select {
			case <-seen:
			case <-wait:
				t.Fatalf("a timer due at Until did not run %v after it", d)
				return closed
			}
		}
	}
}

// followUntil sets a timer for lease's Until, again each time a renewal
// has moved it, and sends on ran the instant each timer was due and when
// it ran, whenever Until had not moved meanwhile. stop ends it.
func followUntil(lease dlock.Lease) (ran <-chan [2]time.Time, stop func()) {
	out, quit := make(chan [2]time.Time), make(chan struct{})
	go func() {
		for {
			due := lease.Until()
			timer := time.NewTimer(time.Until(due))
			select {
			case <-timer.C:
			case <-quit:
				timer.Stop()
				return
			}
			at := time.Now()
			if !lease.Until().Equal(due) {
				continue
			}
			select {
			case out <- [2]time.Time{due, at}:
			case <-quit:
				return
			}
			// Until stopped moving at due. Unless a renewal answered
			// just before its expiry still moves it, the lease ends
			// there: wait for that, reporting nothing more.
			if !settled(lease, due, quit) {
				return
			}
		}
	}()
	return out, func() { close(quit) }
}

// settled waits until lease's Until has moved from due, and reports true,
// or until quit is closed, and reports false. Once the lease has ended at
// due, only quit ends the wait.
func settled(lease dlock.Lease, due time.Time, quit <-chan struct{}) bool {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-quit:
			return false
		case <-tick.C:
			if !lease.Until().Equal(due) {
				return true
			}
		}
	}
}
