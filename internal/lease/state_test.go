package lease

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

func TestEndOrdersContextBeforeDone(t *testing.T) {
	for range 1000 {
		s := newStarted(context.Background(), nil, "k", "tok", 1, time.Now().Add(time.Hour), nil)
		go s.End(dlock.ErrReleased)
		<-s.Done()
		if !errors.Is(context.Cause(s.Context()), dlock.ErrReleased) {
			t.Fatal("Done closed before Context was cancelled")
		}
	}
}

func TestExpiresAtUntilAndExtendMovesIt(t *testing.T) {
	start := time.Now()
	ended := make(chan struct{})
	s := newStarted(context.Background(), nil, "k", "tok", 7, start.Add(50*time.Millisecond), func() { close(ended) })
	if !s.Extend(start.Add(150 * time.Millisecond)) {
		t.Fatal("Extend of a held lease failed")
	}
	s.Extend(start.Add(10 * time.Millisecond)) // never moves the deadline back
	<-ended
	took := time.Since(start)
	// Not before the extended deadline; after it by however long a loaded
	// machine takes to run the timer (415ms at load 15).
	if took < 150*time.Millisecond || took > 2*time.Second {
		t.Errorf("ended after %v; want at the extended deadline, 150ms", took)
	}
	if err := s.Err(); !errors.Is(err, dlock.ErrLost) || !errors.Is(err, dlock.ErrExpired) {
		t.Errorf("Err = %v; want ErrLost wrapping ErrExpired", err)
	}
	if s.Extend(time.Now().Add(time.Hour)) || s.End(dlock.ErrReleased) {
		t.Error("an ended lease was extended or ended again")
	}
	if ended, err := s.Ended(true); !ended || !errors.Is(err, dlock.ErrNotHeld) || !errors.Is(err, dlock.ErrExpired) {
		t.Errorf("Ended(true) = %v, %v; want ErrNotHeld and the cause", ended, err)
	}
}

func TestOwnerIsToken(t *testing.T) {
	s := newStarted(context.Background(), nil, "k", "tok", 1, time.Now().Add(time.Hour), nil)
	defer s.End(dlock.ErrReleased)
	if owner, ok := dlock.OwnerFrom(s.Context()); !ok || owner != "tok" {
		t.Errorf("owner = %q, %v", owner, ok)
	}
}

// A renewal's verdict does not end a lease its holder is releasing: the
// release decides. Before BeginRelease, and for a lease not being
// released, Lose ends it.
func TestLoseWhileReleasingIsIgnored(t *testing.T) {
	lost := dlock.Lost(dlock.ErrTakenOver)
	s := newStarted(context.Background(), nil, "k", "tok", 1, time.Now().Add(time.Hour), nil)
	if ended, err := s.BeginRelease(); ended || err != nil {
		t.Fatalf("BeginRelease of a held lease = %v, %v", ended, err)
	}
	if !s.Releasing() {
		t.Fatal("Releasing is false after BeginRelease")
	}
	if s.Lose(lost) {
		t.Fatal("Lose ended a lease being released")
	}
	if !s.End(dlock.ErrReleased) || s.Err() != dlock.ErrReleased {
		t.Fatalf("Err = %v; want ErrReleased", s.Err())
	}
	if ended, err := s.BeginRelease(); !ended || err != nil {
		t.Errorf("BeginRelease of a released lease = %v, %v; want true, nil", ended, err)
	}

	held := newStarted(context.Background(), nil, "k", "tok", 1, time.Now().Add(time.Hour), nil)
	if !held.Lose(lost) || !errors.Is(held.Err(), dlock.ErrTakenOver) {
		t.Fatalf("Lose of a held lease: Err = %v", held.Err())
	}
	if ended, err := held.BeginRelease(); !ended || !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("BeginRelease of a lost lease = %v, %v; want true, ErrNotHeld", ended, err)
	}
}

type fakeLease struct {
	token string
	st    State
}

func (f *fakeLease) Token() string                 { return f.token }
func (f *fakeLease) Key() string                   { return "k" }
func (f *fakeLease) End(error) bool                { return true }
func (f *fakeLease) Release(context.Context) error { return nil }
func (f *fakeLease) state() *State                 { return &f.st }

// A registry gives its memory back when most of a large number of leases
// are gone.
func TestRegistryShrinks(t *testing.T) {
	var r Registry
	ls := make([]*fakeLease, 100000)
	for i := range ls {
		ls[i] = &fakeLease{token: strconv.Itoa(i), st: State{held: -1}}
		r.Add(ls[i])
	}
	for _, l := range ls[:len(ls)-10] {
		r.Remove(l)
	}
	if r.peak > 1000 || cap(r.held) > 1000 {
		t.Errorf("after removing all but 10 of 100000 leases, the map was last made for %d and the slice holds %d", r.peak, cap(r.held))
	}
	for _, l := range ls[len(ls)-10:] {
		if !r.Holds(dlock.WithOwner(context.Background(), l.token), "k") {
			t.Fatal("a lease was lost when the maps were made again")
		}
	}
}

// A release whose reply comes after the lease expired does not return nil:
// Release returns nil only if Err is ErrReleased.
func TestReleasedAfterExpiry(t *testing.T) {
	s := newStarted(context.Background(), nil, "k", "tok", 1, time.Now().Add(10*time.Millisecond), nil)
	s.BeginRelease()
	<-s.Done() // expired while "the release was in flight"
	if err := s.Released(); !errors.Is(err, dlock.ErrNotHeld) || !errors.Is(err, dlock.ErrExpired) {
		t.Errorf("Released after expiry = %v; want ErrNotHeld and ErrExpired", err)
	}
	held := newStarted(context.Background(), nil, "k", "tok", 1, time.Now().Add(time.Hour), nil)
	if err := held.Released(); err != nil || held.Err() != dlock.ErrReleased {
		t.Errorf("Released = %v, Err = %v; want nil, ErrReleased", err, held.Err())
	}
}

func TestCapHold(t *testing.T) {
	start := time.Now()
	ended := make(chan struct{})
	s := newStarted(context.Background(), nil, "k", "tok", 7, start.Add(time.Hour), func() { close(ended) })
	s.CapHold(start.Add(100 * time.Millisecond))
	if got := s.Until(); !got.Equal(start.Add(100 * time.Millisecond)) {
		t.Fatalf("Until = %v after CapHold; want the cap", got.Sub(start))
	}
	s.Extend(start.Add(time.Hour)) // a renewal cannot pass the cap
	if got := s.Until(); !got.Equal(start.Add(100 * time.Millisecond)) {
		t.Fatalf("Until = %v after Extend; want the cap", got.Sub(start))
	}
	if s.MaxHoldReached() {
		t.Fatal("MaxHoldReached while held")
	}
	<-ended
	if err := s.Err(); !errors.Is(err, dlock.ErrMaxHold) || !errors.Is(err, dlock.ErrLost) {
		t.Errorf("Err = %v; want ErrLost wrapping ErrMaxHold", err)
	}
	if !s.MaxHoldReached() {
		t.Error("MaxHoldReached = false after the cap")
	}

	// A lease that expires before its cap (its renewals failed) is
	// expired, not capped.
	s = newStarted(context.Background(), nil, "k", "tok", 7, time.Now().Add(20*time.Millisecond), nil)
	s.CapHold(time.Now().Add(time.Hour))
	<-s.Done()
	if err := s.Err(); !errors.Is(err, dlock.ErrExpired) || s.MaxHoldReached() {
		t.Errorf("Err = %v, MaxHoldReached = %v; want ErrExpired, false", err, s.MaxHoldReached())
	}
}

func TestSecondReleaseWaitsForTheFirst(t *testing.T) {
	s := newStarted(context.Background(), nil, "k", "tok", 1, time.Now().Add(time.Hour), nil)
	if ended, _ := s.BeginRelease(); ended {
		t.Fatal("BeginRelease of a held lease reported ended")
	}
	second := make(chan error, 1)
	go func() {
		ended, err := s.BeginRelease()
		if !ended {
			err = errors.New("the second BeginRelease began a release too")
		}
		second <- err
	}()
	select {
	case err := <-second:
		t.Fatalf("the second BeginRelease returned (%v) while the first was in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	if err := s.Released(); err != nil {
		t.Fatalf("Released: %v", err)
	}
	if err := <-second; err != nil {
		t.Fatalf("the second BeginRelease: %v; want ended with nil", err)
	}
}

// newStarted returns a State as New does, its timer armed as a backend
// arms it once its lease is complete.
func newStarted(parent context.Context, ev *Events, key, token string, fence uint64, until time.Time, onEnd func()) *State {
	s := New(parent, ev, key, token, fence, until, onEnd)
	s.Start()
	return s
}

// A lease granted with an Until already past (a loaded machine) ends at
// once when started, and its onEnd sees the value that embeds the State
// whole: New armed its timer itself, which could run onEnd before the
// backend had stored the State (a data race in chaos's etcd3 run, under
// -race, and a nil State's Token in onEnd).
func TestStartAfterTheLeaseIsComplete(t *testing.T) {
	for range 50 {
		type holder struct {
			*State
			name string
		}
		h := &holder{}
		ended := make(chan string, 1)
		h.State = New(context.Background(), nil, "k", "tok", 1, time.Now().Add(-time.Second), func() { ended <- h.name + "/" + h.Token() })
		h.name = "held"
		select {
		case got := <-ended:
			t.Fatalf("the lease ended (%q) before Start", got)
		case <-time.After(time.Millisecond):
		}
		h.Start()
		select {
		case got := <-ended:
			if got != "held/tok" {
				t.Fatalf("onEnd saw %q; want held/tok", got)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a lease whose Until had passed did not end once started")
		}
		if !errors.Is(h.Err(), dlock.ErrExpired) {
			t.Fatalf("Err = %v; want ErrExpired", h.Err())
		}
	}
}
