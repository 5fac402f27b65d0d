package lease

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// recorder is an observer that keeps every event. It calls back into the
// lease it is given, as an observer may, to show that no mutex is held.
type recorder struct {
	mu     sync.Mutex
	events []dlock.Event
	probe  *State
}

func (r *recorder) Observe(e dlock.Event) {
	if r.probe != nil {
		r.probe.Err()
		r.probe.Until()
		r.probe.Context()
	}
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *recorder) kinds() []dlock.EventKind {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ks []dlock.EventKind
	for _, e := range r.events {
		ks = append(ks, e.Kind)
	}
	return ks
}

func (r *recorder) last() dlock.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.events[len(r.events)-1]
}

// testLease is a backend's lease: a State plus Refresh and Release.
type testLease struct{ *State }

func (testLease) Refresh(context.Context) error { return nil }
func (l testLease) Release(context.Context) error {
	l.End(dlock.ErrReleased)
	return nil
}

func newTestLease(ev *Events, ttl time.Duration) testLease {
	return testLease{newStarted(context.Background(), ev, "key", "tok", 42, time.Now().Add(ttl), nil)}
}

func TestAttemptReportsAcquisition(t *testing.T) {
	r := &recorder{}
	ev := NewEvents(r, "test", "orders", "Mutex")
	a := ev.Begin(t.Context())
	a.Waiting()
	a.Waiting() // at most once per call
	time.Sleep(5 * time.Millisecond)
	l := newTestLease(ev, time.Hour)
	r.probe = l.State
	if got, err := a.End(l, nil); got != l || err != nil {
		t.Fatalf("End returned %v, %v; want its arguments", got, err)
	}
	want := []dlock.EventKind{dlock.EventAcquiring, dlock.EventWaiting, dlock.EventAcquired}
	if got := r.kinds(); !slices.Equal(got, want) {
		t.Fatalf("events %v; want %v", got, want)
	}
	e := r.last()
	if e.Name != "orders" || e.Lock != "Mutex" || e.Fence != 42 || !e.Waited || e.Wait < 5*time.Millisecond {
		t.Errorf("Acquired = %+v; want orders, Mutex, fence 42, waited, Wait >= 5ms", e)
	}

	l.Extend(time.Now().Add(2 * time.Hour))
	l.Extend(time.Now()) // does not move the deadline: no event
	l.RenewFailed(errors.New("boom"))
	time.Sleep(5 * time.Millisecond)
	l.Release(context.Background())
	l.RenewFailed(errors.New("after the end")) // not reported
	want = append(want, dlock.EventRenewed, dlock.EventRenewFailed, dlock.EventReleased)
	if got := r.kinds(); !slices.Equal(got, want) {
		t.Fatalf("events %v; want %v", got, want)
	}
	if e := r.last(); e.Held < 5*time.Millisecond || e.Err != nil || e.Fence != 42 {
		t.Errorf("Released = %+v; want Held >= 5ms, no Err, fence 42", e)
	}
}

func TestAttemptReportsFailure(t *testing.T) {
	r := &recorder{}
	ev := NewEvents(r, "test", "orders", "RWMutex.read")
	hard := errors.New("hard")
	for _, tc := range []struct {
		l       dlock.Lease
		err     error
		wantErr error
	}{
		{nil, dlock.NotObtained(context.Canceled), context.Canceled},
		{nil, nil, dlock.ErrNotObtained},
		{nil, hard, hard},
	} {
		a := ev.Begin(t.Context())
		a.End(tc.l, tc.err)
		e := r.last()
		if e.Kind != dlock.EventNotAcquired || !errors.Is(e.Err, tc.wantErr) || e.Waited {
			t.Errorf("End(%v, %v) reported %+v; want NotAcquired matching %v", tc.l, tc.err, e, tc.wantErr)
		}
	}
}

// A lease that ends before its Lock call reports it acquired reports the
// end after EventAcquired; one never handed out reports nothing.
func TestLeaseEventsWaitForAcquired(t *testing.T) {
	r := &recorder{}
	ev := NewEvents(r, "test", "n", "Mutex")
	a := ev.Begin(t.Context())
	l := newTestLease(ev, time.Hour)
	l.Extend(time.Now().Add(2 * time.Hour)) // before Acquired: not reported
	l.End(dlock.Lost(dlock.ErrTakenOver))
	a.End(l, nil)
	want := []dlock.EventKind{dlock.EventAcquiring, dlock.EventAcquired, dlock.EventLost}
	if got := r.kinds(); !slices.Equal(got, want) {
		t.Fatalf("events %v; want %v", got, want)
	}
	if e := r.last(); !errors.Is(e.Err, dlock.ErrTakenOver) || e.Held != 0 {
		t.Errorf("Lost = %+v; want ErrTakenOver, Held 0", e)
	}

	r2 := &recorder{}
	never := newTestLease(NewEvents(r2, "test", "n", "Mutex"), time.Hour)
	never.End(dlock.Lost(errors.New("client closed during the grant")))
	if len(r2.kinds()) != 0 {
		t.Errorf("a lease never handed out reported %v", r2.kinds())
	}
}

func TestExpiryReportsLost(t *testing.T) {
	r := &recorder{}
	ev := NewEvents(r, "test", "n", "Mutex")
	a := ev.Begin(t.Context())
	l := newTestLease(ev, 30*time.Millisecond)
	r.probe = l.State
	a.End(l, nil)
	<-l.Done()
	for deadline := time.Now().Add(time.Second); len(r.kinds()) < 3 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond) // the event follows Done
	}
	e := r.last()
	if e.Kind != dlock.EventLost || !errors.Is(e.Err, dlock.ErrLost) || !errors.Is(e.Err, dlock.ErrExpired) || e.Held <= 0 {
		t.Errorf("last event %+v; want Lost with ErrExpired and Held > 0", e)
	}
}

// With no observer, the events cost a nil check: no allocation.
func TestNoObserverAllocatesNothing(t *testing.T) {
	ev := NewEvents(nil, "test", "n", "Mutex")
	if ev != nil {
		t.Fatal("NewEvents(nil, ...) is not nil")
	}
	s := newStarted(context.Background(), ev, "k", "tok", 1, time.Now().Add(time.Hour), nil)
	defer s.End(dlock.ErrReleased)
	l := testLease{s}
	failed := errors.New("failed")
	allocs := testing.AllocsPerRun(1000, func() {
		a := ev.Begin(t.Context())
		a.Waiting()
		a.End(l, nil)
		a.End(nil, failed)
		s.Extend(time.Now().Add(time.Hour))
		s.RenewFailed(failed)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per acquisition and renewal without an observer; want 0", allocs)
	}
}

func BenchmarkAttempt(b *testing.B) {
	for _, tc := range []struct {
		name string
		obs  dlock.Observer
	}{{"none", nil}, {"func", dlock.ObserverFunc(func(dlock.Event) {})}} {
		b.Run(tc.name, func(b *testing.B) {
			ev := NewEvents(tc.obs, "test", "n", "Mutex")
			s := newStarted(context.Background(), ev, "k", "tok", 1, time.Now().Add(time.Hour), nil)
			defer s.End(dlock.ErrReleased)
			l := testLease{s}
			b.ReportAllocs()
			for b.Loop() {
				a := ev.Begin(b.Context())
				a.Waiting()
				a.End(l, nil)
			}
		})
	}
}

func TestCause(t *testing.T) {
	closed := errors.New("test: closed")
	RegisterCause(closed, "closed")
	for _, tc := range []struct {
		err  error
		want string
	}{
		{dlock.Lost(dlock.ErrExpired), "expired"},
		{dlock.Lost(dlock.ErrTakenOver), "taken_over"},
		{dlock.Lost(fmt.Errorf("wrapped: %w", closed)), "closed"},
		{dlock.Lost(errors.New("WRONGTYPE")), "other"},
		{nil, "other"},
	} {
		if got := Cause(tc.err); got != tc.want {
			t.Errorf("Cause(%v) = %q; want %q", tc.err, got, tc.want)
		}
	}
}

func TestObserverCombinesLogger(t *testing.T) {
	if Observer(nil, nil) != nil {
		t.Error("Observer(nil, nil) is not nil")
	}
	r := &recorder{}
	if Observer(r, nil) != dlock.Observer(r) {
		t.Error("Observer(r, nil) is not r")
	}
}

// ctxRecorder is a dlock.ContextObserver that keeps the value of ctxKey in
// the context of each event.
type ctxRecorder struct {
	mu     sync.Mutex
	values []any
	events []dlock.Event
}

type ctxKey struct{}

func (r *ctxRecorder) Observe(e dlock.Event) { r.ObserveContext(nil, e) }

func (r *ctxRecorder) ObserveContext(ctx context.Context, e dlock.Event) {
	var v any = "no context"
	if ctx != nil {
		v = ctx.Value(ctxKey{})
	}
	r.mu.Lock()
	r.values = append(r.values, v)
	r.events = append(r.events, e)
	r.mu.Unlock()
}

// A ContextObserver gets the call's context with the call's events, and
// one with its values with the lease's; every event names the backend.
// Through dlock.Observers too, beside an Observer that takes no context.
func TestContextObserverGetsCallContext(t *testing.T) {
	for _, wrap := range []func(*ctxRecorder) dlock.Observer{
		func(r *ctxRecorder) dlock.Observer { return r },
		func(r *ctxRecorder) dlock.Observer {
			return dlock.Observers(r, dlock.ObserverFunc(func(dlock.Event) {}))
		},
	} {
		r := &ctxRecorder{}
		ev := NewEvents(wrap(r), "redislock", "orders", "Mutex")
		ctx, cancel := context.WithCancel(context.WithValue(t.Context(), ctxKey{}, "call"))
		a := ev.Begin(ctx)
		a.Waiting()
		l := testLease{newStarted(ctx, ev, "key", "tok", 7, time.Now().Add(time.Hour), nil)}
		a.End(l, nil)
		cancel() // the lease's events keep the values
		l.Extend(time.Now().Add(2 * time.Hour))
		l.Release(t.Context())
		a = ev.Begin(context.WithValue(t.Context(), ctxKey{}, "second"))
		a.End(nil, dlock.ErrNotObtained)

		want := []any{"call", "call", "call", "call", "call", "second", "second"}
		if !slices.Equal(r.values, want) {
			t.Errorf("context values %v; want %v", r.values, want)
		}
		for _, e := range r.events {
			if e.Backend != "redislock" || e.Name != "orders" || e.Lock != "Mutex" {
				t.Errorf("%v event: backend %q name %q kind %q", e.Kind, e.Backend, e.Name, e.Lock)
			}
		}
	}
}
