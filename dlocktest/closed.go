package dlocktest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// CloseWait is how soon after its Client's Close a waiting Lock must
// return: at once on a quiet machine, within CloseWait on a loaded one.
const CloseWait = 2 * time.Second

// closedWhileWaiting: a Lock waiting for a held lock when its Client is
// closed returns within CloseWait, with an error matching both
// ErrNotObtained and the backend's ErrClosed; Close returns nil; and once
// the holder releases, the waiter has left nothing behind on the server.
func (s *suite) closedWhileWaiting(t *testing.T) {
	if s.b.CloseClient == nil || s.b.ErrClosed == nil {
		t.Fatal("dlocktest: Backend.CloseClient and Backend.ErrClosed are required by this case")
	}
	key := uniqueKey(t)
	ctx := ctxFor(t, time.Minute)
	holder := s.b.NewLocker(t, key, Options{TTL: 5 * time.Second})
	lease := mustLock(t, ctx, holder)

	waiting := make(chan struct{})
	var once sync.Once
	obs := dlock.ObserverFunc(func(e dlock.Event) {
		if e.Kind == dlock.EventWaiting {
			once.Do(func() { close(waiting) })
		}
	})
	waiter := s.b.NewLocker(t, key, Options{TTL: 5 * time.Second, Observer: obs})
	type result struct {
		lease dlock.Lease
		err   error
		at    time.Time
	}
	done := make(chan result, 1)
	go func() {
		l, err := waiter.Lock(ctx)
		done <- result{l, err, time.Now()}
	}()
	select {
	case <-waiting:
	case r := <-done:
		t.Fatalf("Lock of a held lock returned (%v, %v) before Close", r.lease, r.err)
	case <-time.After(10 * time.Second):
		t.Fatal("Lock of a held lock reported no EventWaiting within 10s")
	}
	time.Sleep(200 * time.Millisecond) // well into its wait

	closing := time.Now()
	closed := make(chan error, 1)
	go func() { closed <- s.b.CloseClient(waiter) }()
	select {
	case r := <-done:
		took := r.at.Sub(closing)
		t.Logf("Lock returned %v after Close began: %v", took.Round(time.Millisecond), r.err)
		if r.err == nil {
			r.lease.Release(ctx)
			t.Fatal("Lock of a held lock succeeded after its Client was closed")
		}
		if !errors.Is(r.err, dlock.ErrNotObtained) || !errors.Is(r.err, s.b.ErrClosed) {
			t.Errorf("Lock waiting when its Client was closed = %v; want an error matching ErrNotObtained and %v", r.err, s.b.ErrClosed)
		}
		if took > CloseWait {
			t.Errorf("Lock returned %v after Close; want within %v", took, CloseWait)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Lock still waiting 30s after its Client was closed")
	}
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close with a Lock waiting = %v; want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not return within 30s")
	}
	if _, err := waiter.TryLock(ctx); !errors.Is(err, s.b.ErrClosed) {
		t.Errorf("TryLock after Close = %v; want %v", err, s.b.ErrClosed)
	}

	if err := lease.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	var left []string
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if left = s.b.Leftovers(t, key); len(left) == 0 {
			break
		}
	}
	if len(left) > 0 {
		t.Errorf("left behind by a Lock ended by Close, after the holder released: %v", left)
	}
	// Nothing of the closed waiter's may keep the lock from the next
	// owner either.
	next := s.b.NewLocker(t, key, Options{TTL: 5 * time.Second})
	tctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	l, err := next.Lock(tctx)
	if err != nil {
		t.Fatalf("Lock after the holder released and the waiter's Client closed: %v", err)
	}
	l.Release(ctx)
}
