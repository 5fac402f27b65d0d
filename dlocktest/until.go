package dlocktest

import (
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// WaitDoneByUntil waits up to d for lease's Done to close, failing t if it
// does not, and then fails t unless Done closed by the lease's Until. It
// returns when it saw Done closed.
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
	ran, stop := followUntil(lease)
	defer stop()
	closed := waitDone(t, lease, d, what)
	until := lease.Until() // final: an ended lease's Until does not move
	var due, at time.Time
	for wait := time.After(time.Until(until) + d); !due.Equal(until); {
		select {
		case m := <-ran:
			due, at = m[0], m[1]
		case <-wait:
			t.Fatalf("a timer due at Until did not run %v after it", d)
		}
	}
	late, timerLate := closed.Sub(until), max(at.Sub(due), 0)
	if late > timerLate+Slack {
		t.Errorf("Done closed %v after Until, %v after a timer due at Until ran; want no later than that timer (and Slack %v)",
			late, late-timerLate, Slack)
	}
	t.Logf("Done closed %v after Until; a timer due then ran %v late", late, timerLate)
	return closed
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
		}
	}()
	return out, func() { close(quit) }
}
