package lease

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// A stateLease is a Releasable whose Release does what a backend's does
// with its State, with nothing to ask a server.
type stateLease struct{ *State }

func (l *stateLease) Release(context.Context) error {
	if ended, err := l.BeginRelease(); ended {
		return err
	}
	return l.Released()
}

// A lease lost just before Close (Done closed, but the goroutine that
// ended it not yet past onEnd, which removes it from the registry) is not
// a failure of Close: it had nothing to release. Close still releases the
// leases that are held, and reports a release that fails.
func TestRegistryCloseSkipsALeaseJustLost(t *testing.T) {
	var r Registry
	removed, proceed := make(chan struct{}), make(chan struct{})
	var lost *stateLease
	lost = &stateLease{New(context.Background(), nil, "k", "lost", 1, time.Now().Add(time.Hour), func() {
		<-proceed // the goroutine that ended it is descheduled here
		r.Remove(lost)
		close(removed)
	})}
	held := &stateLease{New(context.Background(), nil, "k", "held", 2, time.Now().Add(time.Hour), nil)}
	r.Add(lost)
	r.Add(held)
	go lost.Lose(dlock.Lost(errors.New("key deleted")))
	<-lost.Done()

	ok, err := r.Close(time.Second, errors.New("closed"))
	close(proceed)
	<-removed
	if !ok || err != nil {
		t.Errorf("Close = %v, %v with one lease just lost; want true, nil", ok, err)
	}
	if held.Err() != dlock.ErrReleased {
		t.Errorf("the held lease's Err = %v after Close; want ErrReleased", held.Err())
	}
	if err := lost.Err(); !errors.Is(err, dlock.ErrLost) || errors.Is(err, dlock.ErrReleased) {
		t.Errorf("the lost lease's Err = %v after Close; want its loss", err)
	}
}

// failingLease is held, and its release does not get through.
type failingLease struct{ *State }

func (l *failingLease) Release(context.Context) error {
	return errors.New("server unreachable")
}

func TestRegistryCloseReportsAFailedRelease(t *testing.T) {
	var r Registry
	l := &failingLease{New(context.Background(), nil, "k", "tok", 1, time.Now().Add(time.Hour), nil)}
	r.Add(l)
	closed := errors.New("closed")
	if _, err := r.Close(time.Second, closed); err == nil {
		t.Error("Close = nil with a release that failed; want its error")
	}
	if err := l.Err(); !errors.Is(err, dlock.ErrLost) || !errors.Is(err, closed) {
		t.Errorf("Err = %v after a failed release on Close; want ErrLost wrapping the cause", err)
	}
}
