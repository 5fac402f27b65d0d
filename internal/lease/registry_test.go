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
	lost = &stateLease{newStarted(context.Background(), nil, "k", "lost", 1, time.Now().Add(time.Hour), func() {
		<-proceed // the goroutine that ended it is descheduled here
		r.Remove(lost)
		close(removed)
	})}
	held := &stateLease{newStarted(context.Background(), nil, "k", "held", 2, time.Now().Add(time.Hour), nil)}
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
	l := &failingLease{newStarted(context.Background(), nil, "k", "tok", 1, time.Now().Add(time.Hour), nil)}
	r.Add(l)
	closed := errors.New("closed")
	if _, err := r.Close(time.Second, closed); err == nil {
		t.Error("Close = nil with a release that failed; want its error")
	}
	if err := l.Err(); !errors.Is(err, dlock.ErrLost) || !errors.Is(err, closed) {
		t.Errorf("Err = %v after a failed release on Close; want ErrLost wrapping the cause", err)
	}
}

// Close cancels the calls under way with its cause and waits for them;
// their errors then match both dlock.ErrNotObtained and the cause, as do
// those of calls begun after Close. A call whose own context ended keeps
// its error.
func TestRegistryCloseEndsCallsUnderWay(t *testing.T) {
	var r Registry
	errClosed := errors.New("client closed")
	ctx, end := r.Begin(context.Background())
	done, cancelled := context.WithCancel(context.Background())
	cancelled()
	dctx, dend := r.Begin(done)
	ended := make(chan error, 1)
	go func() {
		<-ctx.Done()
		time.Sleep(50 * time.Millisecond) // Close must wait for this
		ended <- end(dlock.NotObtained(ctx.Err()))
	}()
	start := time.Now()
	if _, err := r.Close(time.Second, errClosed); err != nil {
		t.Fatal(err)
	}
	if len(ended) == 0 {
		t.Errorf("Close returned after %v, before the call under way ended", time.Since(start))
	}
	if err := <-ended; !errors.Is(err, dlock.ErrNotObtained) || !errors.Is(err, errClosed) {
		t.Errorf("call under way = %v; want ErrNotObtained and the cause", err)
	}
	if err := dend(dlock.NotObtained(dctx.Err())); errors.Is(err, errClosed) || !errors.Is(err, context.Canceled) {
		t.Errorf("call cancelled by its own context = %v; want Canceled", err)
	}
	lctx, lend := r.Begin(context.Background())
	if context.Cause(lctx) != errClosed {
		t.Errorf("a call begun after Close has cause %v; want the cause", context.Cause(lctx))
	}
	if err := lend(errClosed); !errors.Is(err, dlock.ErrNotObtained) || !errors.Is(err, errClosed) {
		t.Errorf("call begun after Close = %v; want ErrNotObtained and the cause", err)
	}
}
