package lease

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// waitDone waits for s to end, at most bound.
func waitDone(t *testing.T, name string, s *State, bound time.Duration) {
	t.Helper()
	select {
	case <-s.Done():
	case <-time.After(bound):
		t.Fatalf("%s not ended %v after its Until", name, bound)
	}
}

// A lease whose Until is the zero time, or any time so far back that its
// distance from now does not fit in a Duration, ends at once when
// started, as a timer per lease did, and does not stop the expiry of the
// other leases in its heap.
func TestExpiryOfAncientUntil(t *testing.T) {
	for _, first := range []bool{false, true} {
		t.Run(fmt.Sprintf("ancientFirst=%v", first), func(t *testing.T) {
			other := New(context.Background(), nil, "other", "t2", 2, time.Now().Add(50*time.Millisecond), nil)
			old := New(context.Background(), nil, "old", "t1", 1, time.Time{}, nil)
			old.shard = other.shard
			sh := &shards[other.shard]
			t.Cleanup(func() {
				// Leave the shared heap working for the tests after this one,
				// whatever the outcome.
				old.End(dlock.ErrReleased)
				other.End(dlock.ErrReleased)
				sh.mu.Lock()
				sh.armedAt = 0
				if len(sh.q) > 0 {
					sh.armedAt = max(sh.q[0].at, 1)
					sh.timer.Reset(time.Duration(max(sh.q[0].at-now(), 0)))
				}
				sh.mu.Unlock()
			})
			if first {
				old.Start()
				other.Start()
			} else {
				other.Start()
				old.Start()
			}
			waitDone(t, "a lease sharing a heap with one whose Until is the zero time", other, 5*time.Second)
			waitDone(t, "a lease with the zero Until", old, 5*time.Second)
		})
	}
}

// Many leases due at one instant, over every heap, all end by then (within
// a generous bound), each once, and leave their heaps.
func TestManyDueAtOnce(t *testing.T) {
	const n = 4000
	before := runtime.NumGoroutine()
	until := time.Now().Add(100 * time.Millisecond)
	var ends atomic.Int64
	states := make([]*State, n)
	for i := range states {
		states[i] = New(context.Background(), nil, "k", strconv.Itoa(i), uint64(i), until, func() { ends.Add(1) })
		states[i].Start()
	}
	for i, s := range states {
		if i%3 == 0 {
			s.Done() // some have asked for Done, some not
		}
	}
	for i, s := range states {
		waitDone(t, "lease "+strconv.Itoa(i), s, 10*time.Second)
		if !errors.Is(s.Err(), dlock.ErrExpired) {
			t.Fatalf("lease %d: Err %v", i, s.Err())
		}
	}
	if got := ends.Load(); got != n {
		t.Errorf("onEnd ran %d times for %d leases", got, n)
	}
	// The goroutines that ended them are gone.
	left := runtime.NumGoroutine()
	for deadline := time.Now().Add(5 * time.Second); left > before+2 && time.Now().Before(deadline); left = runtime.NumGoroutine() {
		time.Sleep(10 * time.Millisecond)
	}
	if left > before+2 {
		t.Errorf("%d goroutines before, %d after every lease ended", before, left)
	}
	for _, s := range states {
		sh := &shards[s.shard]
		sh.mu.Lock()
		slot := s.slot
		sh.mu.Unlock()
		if slot != -1 {
			t.Fatalf("an ended lease is in its heap (slot %d)", slot)
		}
	}
}

// A lease released, extended and capped while its heap entry comes due
// ends exactly once, with one cause, and Err is set before Done is seen
// closed; Done and Context, asked for the first time from many goroutines
// at once, are one channel and one context.
func TestEndRacesExpiry(t *testing.T) {
	for i := range 300 {
		var ends atomic.Int32
		until := time.Now().Add(time.Duration(i%5) * time.Millisecond)
		s := New(context.Background(), nil, "k", "t", 1, until, func() { ends.Add(1) })
		s.Start()
		var wg sync.WaitGroup
		dones := make([]<-chan struct{}, 8)
		ctxs := make([]context.Context, 8)
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				switch g % 4 {
				case 0:
					s.End(dlock.ErrReleased)
				case 1:
					s.Extend(time.Now().Add(time.Millisecond))
				case 2:
					s.CapHold(time.Now())
				}
				dones[g] = s.Done()
				ctxs[g] = s.Context()
				<-dones[g]
				if s.Err() == nil {
					t.Error("Done closed with Err nil")
				}
				if context.Cause(ctxs[g]) == nil {
					t.Error("Done closed before Context was cancelled")
				}
			}()
		}
		wg.Wait()
		if n := ends.Load(); n != 1 {
			t.Fatalf("onEnd ran %d times", n)
		}
		for g := range dones {
			if ctxs[g] != ctxs[0] {
				t.Fatal("Context returned two contexts")
			}
		}
	}
}

// CapHold below the current deadline of a started lease moves its expiry
// earlier; Extend never moves Until back, and the lease ends at the
// earlier of its Until and its cap.
func TestCapHoldBelowStartedDeadline(t *testing.T) {
	start := time.Now()
	s := newStarted(context.Background(), nil, "k", "t", 1, start.Add(time.Hour), nil)
	s.Extend(start.Add(2 * time.Hour))
	s.Extend(start.Add(time.Minute)) // earlier: ignored
	if !s.Until().Equal(start.Add(2 * time.Hour)) {
		t.Fatalf("Until = %v; want the latest Extend", s.Until().Sub(start))
	}
	s.CapHold(start.Add(60 * time.Millisecond))
	waitDone(t, "a lease capped below its deadline", s, 5*time.Second)
	if time.Since(start) < 60*time.Millisecond || !errors.Is(s.Err(), dlock.ErrMaxHold) {
		t.Errorf("ended after %v with %v; want at the cap, ErrMaxHold", time.Since(start), s.Err())
	}
}

// The caller's context, cancelled after the lease was made from a Lock
// call's context, neither ends the lease nor cancels its Context; the
// Context keeps the caller's values.
func TestCallerCancelDoesNotEndLease(t *testing.T) {
	var r Registry
	type key struct{}
	caller, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
	cctx, end := r.Begin(caller)
	s := newStarted(cctx, nil, "k", "t", 1, time.Now().Add(time.Hour), nil)
	defer s.End(dlock.ErrReleased)
	if err := end(nil); err != nil {
		t.Fatal(err)
	}
	cancel()
	time.Sleep(10 * time.Millisecond)
	if s.Err() != nil || s.Context().Err() != nil {
		t.Fatalf("cancelling the caller's context ended the lease: %v, %v", s.Err(), s.Context().Err())
	}
	if s.Context().Value(key{}) != "v" {
		t.Error("the lease's Context lost the caller's values")
	}
	select {
	case <-s.Done():
		t.Fatal("Done closed")
	default:
	}
}

// A Registry's slot freed by one lease and taken by another: removing the
// first again, or a lease never added, changes nothing; Close releases
// exactly the leases held, each once, and Held finds the right one.
func TestRegistrySlotReuse(t *testing.T) {
	var r Registry
	var released sync.Map
	mk := func(tok string) *regLease {
		l := &regLease{token: tok, released: &released}
		l.st.held, l.st.slot = -1, -1
		return l
	}
	a, b, c, d, never := mk("a"), mk("b"), mk("c"), mk("d"), mk("x")
	for _, l := range []*regLease{a, b, c} {
		r.Add(l)
	}
	r.Remove(a)
	r.Add(d) // takes a's old slot's neighbour after the swap
	r.Remove(a)
	r.Remove(never)
	r.Add(b) // twice: no second entry
	r.Remove(c)
	r.Remove(c)
	if got := r.Held(dlock.WithOwner(context.Background(), "d")); got != Releasable(d) {
		t.Fatalf("Held(d) = %v", got)
	}
	if got := r.Held(dlock.WithOwner(context.Background(), "a")); got != nil {
		t.Fatalf("Held(a) after Remove = %v", got)
	}
	if _, err := r.Close(time.Second, errors.New("closed")); err != nil {
		t.Fatal(err)
	}
	var got []string
	released.Range(func(k, v any) bool {
		got = append(got, fmt.Sprintf("%s:%d", k, v.(*atomic.Int32).Load()))
		return true
	})
	if len(got) != 2 || !(got[0] == "b:1" && got[1] == "d:1" || got[0] == "d:1" && got[1] == "b:1") {
		t.Errorf("Close released %v; want b and d, once each", got)
	}
}

type regLease struct {
	token    string
	st       State
	released *sync.Map
}

func (l *regLease) Token() string  { return l.token }
func (l *regLease) Key() string    { return "k" }
func (l *regLease) End(error) bool { return true }
func (l *regLease) Release(context.Context) error {
	v, _ := l.released.LoadOrStore(l.token, new(atomic.Int32))
	v.(*atomic.Int32).Add(1)
	return nil
}
func (l *regLease) state() *State { return &l.st }

// A lease that ended before it was added (granted past its Until, its
// expiry ran at Start and its onEnd's Remove found nothing to remove) is
// not kept by the Registry: neither in its held leases, which Close would
// walk, nor as its token's lease.
func TestRegistryAddOfEndedLease(t *testing.T) {
	var r Registry
	removed := make(chan struct{})
	l := &stateLease{}
	l.State = New(context.Background(), nil, "k", "tok", 1, time.Now().Add(-time.Millisecond), func() {
		r.Remove(l)
		close(removed)
	})
	l.Start()
	select {
	case <-removed:
	case <-time.After(5 * time.Second):
		t.Fatal("a lease granted past its Until did not end at Start")
	}
	if !r.Add(l) {
		t.Fatal("Add reported the registry closed")
	}
	r.mu.Lock()
	n, byToken := len(r.held), r.byToken["tok"]
	r.mu.Unlock()
	if n != 0 || byToken != nil {
		t.Errorf("the registry keeps a lease that ended before it was added: %d held, byToken %v", n, byToken != nil)
	}
}

// Done and Context, asked for the first time by many goroutines at once
// while the lease is held, are one channel and one context.
func TestLazyDoneAndContextFirstUse(t *testing.T) {
	for range 200 {
		s := newStarted(context.Background(), nil, "k", "t", 1, time.Now().Add(time.Hour), nil)
		var wg sync.WaitGroup
		dones := make([]<-chan struct{}, 8)
		ctxs := make([]context.Context, 8)
		for g := range 8 {
			wg.Go(func() { dones[g], ctxs[g] = s.Done(), s.Context() })
		}
		wg.Wait()
		for g := range dones {
			if dones[g] != dones[0] || ctxs[g] != ctxs[0] {
				t.Fatal("first calls of Done or Context from many goroutines returned different values")
			}
		}
		s.End(dlock.ErrReleased)
		<-dones[0]
		if context.Cause(ctxs[0]) != dlock.ErrReleased {
			t.Fatalf("Context cause %v", context.Cause(ctxs[0]))
		}
	}
}
