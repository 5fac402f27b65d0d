package dlocktest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// RunObserver checks, as subtests of t, the events that a backend's locks
// report to Options.Observer: the exact sequence for a TryLock of a free
// lock and of a held one, a Lock that waits, a Lock that gives up waiting,
// renewal by the watchdog and by Refresh, release, expiry, and a loss
// behind the holder's back. Each event must carry the lock's name (see
// Backend.LockName), one lock kind, the lease's fence, and the times the
// dlock.Event documentation gives. It needs NewLocker, which must pass
// Options.Observer to the client it makes, and Sabotage.
func RunObserver(t *testing.T, b Backend) {
	if b.NewLocker == nil || b.Sabotage == nil {
		t.Fatalf("dlocktest: RunObserver needs Backend.NewLocker and Backend.Sabotage; got %+v", b)
	}
	s := &observerSuite{b: b}
	t.Run("TryLockFree", s.tryLockFree)
	t.Run("TryLockHeld", s.tryLockHeld)
	t.Run("LockWaits", s.lockWaits)
	t.Run("CancelledWait", s.cancelledWait)
	t.Run("Renewal", s.renewal)
	t.Run("Refresh", s.refresh)
	t.Run("Expiry", s.expiry)
	t.Run("Loss", s.loss)
}

type observerSuite struct{ b Backend }

// A Recorder is a dlock.Observer that keeps every event it is given, for
// tests. It is safe for concurrent use; the zero Recorder is ready.
type Recorder struct {
	mu  sync.Mutex
	evs []dlock.Event
}

// Observe records e.
func (r *Recorder) Observe(e dlock.Event) {
	r.mu.Lock()
	r.evs = append(r.evs, e)
	r.mu.Unlock()
}

// Events returns a copy of the events recorded so far, in order.
func (r *Recorder) Events() []dlock.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]dlock.Event(nil), r.evs...)
}

// WaitFor waits up to d for an event of kind k, and returns the events up
// to and including the first one. It fails t if none comes.
func (r *Recorder) WaitFor(t testing.TB, k dlock.EventKind, d time.Duration) []dlock.Event {
	t.Helper()
	for deadline := time.Now().Add(d); ; time.Sleep(2 * time.Millisecond) {
		evs := r.Events()
		for i, e := range evs {
			if e.Kind == k {
				return evs[:i+1]
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %v event within %v; got %s", k, d, Kinds(evs))
		}
	}
}

// CheckEvents fails t unless evs have exactly the kinds want, in order,
// and every one names the lock name and the lock kind.
func CheckEvents(t testing.TB, evs []dlock.Event, name, kind string, want ...dlock.EventKind) {
	t.Helper()
	ok := len(evs) == len(want)
	for i, e := range evs {
		if e.Name != name || e.Lock != kind {
			t.Errorf("%v event names %q, kind %q; want %q, %q", e.Kind, e.Name, e.Lock, name, kind)
		}
		ok = ok && e.Kind == want[i]
	}
	if !ok {
		t.Fatalf("events %s; want %s", Kinds(evs), pattern(want))
	}
}

// Kinds formats the kinds of evs, as "[acquiring acquired released]".
func Kinds(evs []dlock.Event) string {
	ks := make([]string, len(evs))
	for i, e := range evs {
		ks[i] = e.Kind.String()
	}
	return "[" + strings.Join(ks, " ") + "]"
}

// recorder is the observer of one client in RunObserver.
type recorder struct {
	Recorder
	name string // the Event.Name every event must carry
}

func (r *recorder) events() []dlock.Event { return r.Events() }

func (r *recorder) waitFor(t testing.TB, k dlock.EventKind, d time.Duration) []dlock.Event {
	t.Helper()
	return r.WaitFor(t, k, d)
}

// locker returns a Locker for key on a new client that reports to a new
// recorder.
func (s *observerSuite) locker(t testing.TB, key string, o Options) (dlock.Locker, *recorder) {
	name := key
	if s.b.LockName != nil {
		name = s.b.LockName(key)
	}
	r := &recorder{name: name}
	o.Observer = r
	return s.b.NewLocker(t, key, o), r
}

func kinds(evs []dlock.Event) string { return Kinds(evs) }

// expect checks that evs are, kind for kind, want, where a kind followed
// by renewals in want stands for one or more EventRenewed, and that every
// event names r's lock and the same lock kind. It returns evs.
func (r *recorder) expect(t testing.TB, evs []dlock.Event, want ...dlock.EventKind) []dlock.Event {
	t.Helper()
	if !matches(evs, want) {
		t.Fatalf("events %s; want %s", kinds(evs), pattern(want))
	}
	for _, e := range evs {
		if e.Name != r.name {
			t.Errorf("%v event names %q; want %q, the name the lock was given", e.Kind, e.Name, r.name)
		}
		if e.Lock == "" || e.Lock != evs[0].Lock {
			t.Errorf("%v event has lock kind %q; want %q, not empty, as the first event", e.Kind, e.Lock, evs[0].Lock)
		}
	}
	return evs
}

// renewals in a pattern stands for one or more EventRenewed, and
// anyRenewals for none or more: a lease held for a moment may be renewed
// meanwhile, as often as its backend renews (a ZooKeeper lease every
// third of a third of the session timeout, whatever its TTL).
// anyRenewFailed is none or more EventRenewFailed: a fixed lease that
// runs out may see its session's renewal fail first (ZooKeeper's, on a
// starved machine, load 59), though never a renewal.
const (
	renewals       dlock.EventKind = 255
	anyRenewals    dlock.EventKind = 254
	anyRenewFailed dlock.EventKind = 253
)

func matches(evs []dlock.Event, want []dlock.EventKind) bool {
	i := 0
	for _, k := range want {
		if k == renewals || k == anyRenewals || k == anyRenewFailed {
			kind := dlock.EventRenewed
			if k == anyRenewFailed {
				kind = dlock.EventRenewFailed
			}
			n := 0
			for i < len(evs) && evs[i].Kind == kind {
				i, n = i+1, n+1
			}
			if n == 0 && k == renewals {
				return false
			}
			continue
		}
		if i >= len(evs) || evs[i].Kind != k {
			return false
		}
		i++
	}
	return i == len(evs)
}

func pattern(want []dlock.EventKind) string {
	ks := make([]string, len(want))
	for i, k := range want {
		ks[i] = k.String()
		switch k {
		case renewals:
			ks[i] = "renewed+"
		case anyRenewals:
			ks[i] = "renewed*"
		case anyRenewFailed:
			ks[i] = "renew-failed*"
		}
	}
	return "[" + strings.Join(ks, " ") + "]"
}

// checkAcquired checks the EventAcquired of lease.
func checkAcquired(t testing.TB, e dlock.Event, lease dlock.Lease, waited bool) {
	t.Helper()
	if e.Fence != lease.Fence() || e.Wait <= 0 || e.Waited != waited || e.Err != nil {
		t.Errorf("acquired event %+v; want fence %d, Wait > 0, Waited %v, no Err", e, lease.Fence(), waited)
	}
}

// checkEnded checks the last event of a lease that ended: its fence, a
// Held of at least min, and an Err matching want (nil for a release).
func checkEnded(t testing.TB, e dlock.Event, lease dlock.Lease, min time.Duration, want ...error) {
	t.Helper()
	if e.Fence != lease.Fence() || e.Held < min {
		t.Errorf("%v event %+v; want fence %d and Held >= %v", e.Kind, e, lease.Fence(), min)
	}
	if len(want) == 0 && e.Err != nil {
		t.Errorf("%v event has Err %v; want none", e.Kind, e.Err)
	}
	for _, w := range want {
		if !errors.Is(e.Err, w) {
			t.Errorf("%v event has Err %v; want one matching %v", e.Kind, e.Err, w)
		}
	}
}

// settle waits for events that follow Done (a lease reports its end just
// after Done closes), and returns r's events.
func settle(r *recorder, k dlock.EventKind) []dlock.Event {
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		if evs := r.events(); len(evs) > 0 && evs[len(evs)-1].Kind == k {
			break
		}
	}
	time.Sleep(20 * time.Millisecond) // and nothing after it
	return r.events()
}

const (
	acquiring    = dlock.EventAcquiring
	waiting      = dlock.EventWaiting
	acquired     = dlock.EventAcquired
	notAcquired  = dlock.EventNotAcquired
	renewFailed  = dlock.EventRenewFailed
	lost         = dlock.EventLost
	released     = dlock.EventReleased
	observerHold = 300 * time.Millisecond
)

// tryLockFree: TryLock of a free lock reports Acquiring and Acquired, its
// Release reports Released once.
func (s *observerSuite) tryLockFree(t *testing.T) {
	l, r := s.locker(t, uniqueKey(t), Options{TTL: 10 * time.Second})
	ctx := ctxFor(t, time.Minute)
	lease, err := l.TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock: %v", err)
	}
	evs := r.expect(t, r.events(), acquiring, acquired)
	checkAcquired(t, evs[1], lease, false)
	time.Sleep(10 * time.Millisecond)
	if err := lease.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	lease.Release(ctx) // idempotent: no second event
	evs = r.expect(t, settle(r, released), acquiring, acquired, released)
	checkEnded(t, evs[2], lease, 10*time.Millisecond)
}

// tryLockHeld: TryLock of a held lock reports Acquiring and NotAcquired
// with an error matching ErrNotObtained.
func (s *observerSuite) tryLockHeld(t *testing.T) {
	key := uniqueKey(t)
	holder, hr := s.locker(t, key, Options{TTL: 10 * time.Second})
	l, r := s.locker(t, key, Options{TTL: 10 * time.Second})
	ctx := ctxFor(t, time.Minute)
	lease := mustLock(t, ctx, holder)
	if _, err := l.TryLock(ctx); !errors.Is(err, dlock.ErrNotObtained) {
		t.Fatalf("TryLock of a held lock: %v; want ErrNotObtained", err)
	}
	evs := r.expect(t, r.events(), acquiring, notAcquired)
	if e := evs[1]; !errors.Is(e.Err, dlock.ErrNotObtained) || e.Waited || e.Fence != 0 {
		t.Errorf("not-acquired event %+v; want Err matching ErrNotObtained, not Waited, no fence", e)
	}
	lease.Release(ctx)
	hr.expect(t, settle(hr, released), acquiring, acquired, released)
}

// lockWaits: a Lock that finds the lock held reports Waiting once, then
// Acquired with Wait at least as long as it waited for the holder.
func (s *observerSuite) lockWaits(t *testing.T) {
	key := uniqueKey(t)
	holder, hr := s.locker(t, key, Options{TTL: 10 * time.Second})
	l, r := s.locker(t, key, Options{TTL: 10 * time.Second})
	ctx := ctxFor(t, time.Minute)
	first := mustLock(t, ctx, holder)
	type result struct {
		lease dlock.Lease
		err   error
	}
	done := make(chan result, 1)
	go func() {
		lease, err := l.Lock(ctx)
		done <- result{lease, err}
	}()
	r.waitFor(t, waiting, 10*time.Second)
	time.Sleep(observerHold)
	if err := first.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	res := <-done
	if res.err != nil {
		t.Fatalf("Lock: %v", res.err)
	}
	evs := r.expect(t, r.events(), acquiring, waiting, acquired, anyRenewals)
	checkAcquired(t, evs[2], res.lease, true)
	if evs[2].Wait < observerHold {
		t.Errorf("Wait = %v; want at least the %v the holder kept the lock after the waiter began waiting", evs[2].Wait, observerHold)
	}
	// The holder held the lock for observerHold and more, the waiter for
	// the checks above: either may have been renewed meanwhile.
	hevs := hr.expect(t, settle(hr, released), acquiring, acquired, anyRenewals, released)
	checkEnded(t, hevs[len(hevs)-1], first, observerHold)
	res.lease.Release(ctx)
	r.expect(t, settle(r, released), acquiring, waiting, acquired, anyRenewals, released)
}

// cancelledWait: a Lock that gives up waiting reports Waiting, then
// NotAcquired marked Waited, with an error matching ErrNotObtained and the
// context's.
func (s *observerSuite) cancelledWait(t *testing.T) {
	key := uniqueKey(t)
	holder, _ := s.locker(t, key, Options{TTL: 10 * time.Second})
	l, r := s.locker(t, key, Options{TTL: 10 * time.Second})
	ctx := ctxFor(t, time.Minute)
	lease := mustLock(t, ctx, holder)
	defer lease.Release(ctx)
	wctx, cancel := context.WithTimeout(ctx, observerHold)
	defer cancel()
	if _, err := l.Lock(wctx); !errors.Is(err, dlock.ErrNotObtained) {
		t.Fatalf("Lock past its deadline: %v; want ErrNotObtained", err)
	}
	evs := r.expect(t, r.events(), acquiring, waiting, notAcquired)
	e := evs[2]
	// Wait runs from the backend's start, a little after the context's
	// (zklock said 299.995ms at a load of 59): Slack is that allowance.
	if !e.Waited || !errors.Is(e.Err, dlock.ErrNotObtained) || !errors.Is(e.Err, context.DeadlineExceeded) || e.Wait < observerHold-Slack {
		t.Errorf("not-acquired event %+v; want Waited, Err matching ErrNotObtained and DeadlineExceeded, Wait >= %v", e, observerHold-Slack)
	}
}

// renewal: the watchdog's renewals report Renewed, and nothing fails. As
// in the suite's Renewal, the TTL leaves a renewal, sent every TTL/3,
// 600ms to be late by on a busy machine: with 300ms, one late by 200ms
// (a database under load) failed, or let the lease expire.
func (s *observerSuite) renewal(t *testing.T) {
	ttl := 900 * time.Millisecond
	l, r := s.locker(t, uniqueKey(t), Options{TTL: ttl})
	ctx := ctxFor(t, time.Minute)
	lease := mustLock(t, ctx, l)
	time.Sleep(ttl)
	evs := r.waitFor(t, dlock.EventRenewed, 3*ttl+Slack)
	if err := lease.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	evs = r.expect(t, settle(r, released), acquiring, acquired, renewals, released)
	for _, e := range evs[2 : len(evs)-1] {
		if e.Fence != lease.Fence() {
			t.Errorf("renewed event %+v; want fence %d", e, lease.Fence())
		}
	}
	checkEnded(t, evs[len(evs)-1], lease, ttl)
}

// refresh: a fixed lease reports Renewed when Refresh extends it.
func (s *observerSuite) refresh(t *testing.T) {
	ttl := 600 * time.Millisecond
	l, r := s.locker(t, uniqueKey(t), Options{TTL: ttl, NoRenewal: true})
	ctx := ctxFor(t, time.Minute)
	lease := mustLock(t, ctx, l)
	time.Sleep(ttl / 3)
	if err := lease.Refresh(ctx); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	r.expect(t, r.events(), acquiring, acquired, renewals)
	if err := lease.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	r.expect(t, settle(r, released), acquiring, acquired, renewals, released)
}

// expiry: a fixed lease that runs out reports Lost with ErrExpired.
func (s *observerSuite) expiry(t *testing.T) {
	ttl := 400 * time.Millisecond
	l, r := s.locker(t, uniqueKey(t), Options{TTL: ttl, NoRenewal: true})
	ctx := ctxFor(t, time.Minute)
	lease := mustLock(t, ctx, l)
	// The lease was granted before Lock returned and ends at its Until,
	// which counts from before the attempt was sent (a loaded machine
	// makes the attempt take a good part of the TTL): it was held at least
	// from now to then.
	atLeast := time.Until(lease.Until())
	WaitDoneByUntil(t, lease, ttl+5*time.Second, "the TTL")
	evs := r.expect(t, settle(r, lost), acquiring, acquired, anyRenewFailed, lost)
	checkEnded(t, evs[len(evs)-1], lease, atLeast, dlock.ErrLost, dlock.ErrExpired)
	if err := lease.Release(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("Release after expiry = %v; want ErrNotHeld", err)
	}
	r.expect(t, r.events(), acquiring, acquired, anyRenewFailed, lost) // a refused Release reports nothing
}

// loss: a lock removed behind the holder's back ends its lease with Lost,
// matching ErrLost and the lease's Err, possibly after failed renewals.
func (s *observerSuite) loss(t *testing.T) {
	key := uniqueKey(t)
	ttl := 900 * time.Millisecond
	l, r := s.locker(t, key, Options{TTL: ttl})
	ctx := ctxFor(t, time.Minute)
	lease := mustLock(t, ctx, l)
	s.b.Sabotage(t, key)
	waitDone(t, lease, ttl+Slack, "the lock was deleted")
	evs := settle(r, lost)
	t.Logf("events: %s", kinds(evs))
	if len(evs) < 3 || evs[len(evs)-1].Kind != lost {
		t.Fatalf("events %s; want [acquiring acquired (renewed|renew-failed)* lost]", kinds(evs))
	}
	want := []dlock.EventKind{acquiring, acquired}
	for _, e := range evs[2 : len(evs)-1] {
		if e.Kind != dlock.EventRenewed && e.Kind != renewFailed {
			t.Fatalf("events %s; want [acquiring acquired (renewed|renew-failed)* lost]", kinds(evs))
		}
		if e.Kind == renewFailed && e.Err == nil {
			t.Errorf("renew-failed event %+v has no Err", e)
		}
		want = append(want, e.Kind)
	}
	r.expect(t, evs, append(want, lost)...)
	e := evs[len(evs)-1]
	checkEnded(t, e, lease, 0, dlock.ErrLost)
	if e.Err.Error() != fmt.Sprint(lease.Err()) {
		t.Errorf("lost event Err %q; want the lease's Err %q", e.Err, lease.Err())
	}
}
