// Package lease holds the state every backend's lease shares: identity,
// the conservative deadline, and the one-way transition from held to ended
// that closes Done, cancels Context and fixes Err; and the reporting of
// lock events to a dlock.Observer (see Events), so that every backend
// reports the same events at the same points.
package lease

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
)

// Drift is dlock.Drift: the clock-drift allowance for a claim good for d
// on the server.
func Drift(d time.Duration) time.Duration { return dlock.Drift(d) }

// Validity returns the conservative end of a claim that a request sent at
// start made good for d on the server: d less the drift allowance.
func Validity(start time.Time, d time.Duration) time.Time { return start.Add(d - Drift(d)) }

// State implements the read side of dlock.Lease. Backends embed it and add
// Refresh and Release. A State ends by itself, with an error matching
// dlock.ErrLost and dlock.ErrExpired, when its deadline passes.
//
// A State reports its lease's events to its Events: EventRenewed when
// Extend moves the deadline, EventRenewFailed when the backend says so,
// and EventReleased or EventLost when it ends. It does so only once an
// Attempt has reported the lease acquired, so that a lease never handed
// out (the client closed during the grant) reports nothing, and a lease
// that ended before its Lock call returned reports its end after
// EventAcquired. Events are sent with no mutex held.
type State struct {
	key, token string
	fence      uint64
	parent     context.Context
	onEnd      func()
	ev         *Events

	mu        sync.Mutex
	done      chan struct{} // made on the first call to Done: most holders never ask for it
	until     moment
	holdEnd   moment // the cap on until set by CapHold; zero for none
	shownAt   moment // when EventAcquired was reported
	err       error
	ctx       *leaseContext // made on the first call to Context
	at        moment        // the deadline in the expiry heap (see schedule); guarded by its shard's mu
	slot      int32         // the index in the expiry heap, or -1; guarded by its shard's mu
	held      int32         // the index in its Registry's held leases, or -1; guarded by the Registry's mu
	shard     uint8         // the expiry heap (see shards)
	started   bool          // Start has been called
	releasing bool          // the holder has asked to release: see BeginRelease
	shown     bool          // EventAcquired has been reported: report the rest
}

// A leaseContext is a State's Context, made on first use.
type leaseContext struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// New returns a held State. parent supplies the values of Context (its
// cancellation is ignored); Context also carries token as the owner for
// reentrant locks. onEnd, if not nil, is called once when the lease ends,
// after Done is closed. ev, which may be nil, receives the lease's events.
//
// The lease does not expire by itself until Start: the backend calls Start
// once the value that embeds the State is complete, as onEnd may read it
// and the expiry may come at once (an until already past, on a loaded
// machine). Before Start the lease ends only by End.
func New(parent context.Context, ev *Events, key, token string, fence uint64, until time.Time, onEnd func()) *State {
	if c, ok := parent.(*call); ok {
		// A Lock call's context (see Registry.Begin): keep what it was
		// made from, which has the same values, rather than the call's
		// cancellation, which the lease must not keep alive.
		parent = c.parent
	}
	return &State{key: key, token: token, fence: fence, parent: parent,
		until: at(until), onEnd: onEnd, ev: ev,
		slot: -1, held: -1, shard: uint8(nextShard.Add(1) % expiryShards)}
}

// Start arms the expiry that ends the lease at Until (dlock.ErrExpired)
// or at its cap (dlock.ErrMaxHold). It does nothing the second time, or
// once the lease has ended.
func (s *State) Start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started && s.err == nil {
		s.started = true
		s.schedule(s.until)
	}
}

// resetTimer moves the lease's expiry to until; s.mu must be held. Before
// Start there is none: Start arms it at the Until of then.
func (s *State) resetTimer(until moment) {
	if s.started {
		s.schedule(until)
	}
}

func (s *State) expire() {
	s.mu.Lock()
	early := s.err == nil && now() < s.until
	if early { // Extend moved the deadline (see expiry.go).
		s.resetTimer(s.until)
	}
	capped := s.holdEnd != 0 && s.until >= s.holdEnd
	s.mu.Unlock()
	switch {
	case early:
	case capped:
		s.End(dlock.Lost(dlock.ErrMaxHold))
	default:
		s.End(dlock.Lost(dlock.ErrExpired))
	}
}

// CapHold limits the lease to end by end, however it is renewed: Until
// never moves past end, and a lease that reaches it ends with an error
// matching dlock.ErrMaxHold. Backends call it once, right after New, for a
// lock made WithMaxHold, and give the lock back on the server when
// MaxHoldReached reports true in their onEnd.
func (s *State) CapHold(end time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := max(at(end), 1)
	s.holdEnd = e
	if s.err == nil && s.until > e {
		s.until = e
		s.resetTimer(e)
	}
}

// MaxHoldReached reports whether the lease ended because it reached the
// cap set by CapHold while its holder was not releasing it: only then
// must the backend give the lock back itself, since a Release in flight
// does it.
func (s *State) MaxHoldReached() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.holdEnd != 0 && !s.releasing && s.err != nil && errors.Is(s.err, dlock.ErrMaxHold)
}

// atCap reports whether until is at or past the cap set by CapHold.
func (s *State) atCap(until time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.holdEnd != 0 && at(until) >= s.holdEnd
}

// Key returns the lock's name.
func (s *State) Key() string { return s.key }

// Token returns the owner token.
func (s *State) Token() string { return s.token }

// Fence returns the fencing token.
func (s *State) Fence() uint64 { return s.fence }

// Done returns a channel that is closed when the lease ends. It is made on
// first use, as most holders of many leases never ask for it; every call
// returns the same channel, or, once the lease has ended, a closed one.
func (s *State) Done() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done == nil {
		if s.err != nil {
			return closedDone
		}
		s.done = make(chan struct{})
	}
	return s.done
}

// closedDone is the Done of a lease that ended before anyone asked for it.
var closedDone = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Context is cancelled, with Err as its cause, when the lease ends. It is
// made on first use: most holders never ask for it.
func (s *State) Context() context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx == nil {
		ctx, cancel := context.WithCancelCause(dlock.WithOwner(context.WithoutCancel(s.parent), s.token))
		s.ctx = &leaseContext{ctx, cancel}
		if s.err != nil {
			cancel(s.err)
		}
	}
	return s.ctx.ctx
}

// Until returns the current conservative deadline.
func (s *State) Until() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.until.time()
}

// Err returns nil while held, then the reason the lease ended.
func (s *State) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Extend moves the deadline to until if that is later than the current
// one, and then reports EventRenewed. It reports false, and changes
// nothing, if the lease has ended.
func (s *State) Extend(until time.Time) bool {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return false
	}
	u := at(until)
	if s.holdEnd != 0 && u > s.holdEnd {
		u = s.holdEnd
	}
	moved := u > s.until
	if moved {
		// The expiry stays where it is: there the lease finds its
		// deadline moved, and goes back in at the new one.
		s.until = u
	}
	report := moved && s.shown
	s.mu.Unlock()
	if report {
		s.ev.emit(s.parent, dlock.Event{Kind: dlock.EventRenewed, Fence: s.fence})
	}
	return true
}

// Observed reports whether the lease's events go anywhere: a backend that
// must build an error only to report it asks first.
func (s *State) Observed() bool { return s.ev != nil }

// RenewFailed reports EventRenewFailed with err, if the lease is still
// held and not being released: an attempt to renew or refresh it failed. A backend that ends the
// lease because of that attempt calls it before End, with the same error.
func (s *State) RenewFailed(err error) {
	if s.ev == nil {
		return
	}
	s.mu.Lock()
	report := s.shown && s.err == nil && !s.releasing
	s.mu.Unlock()
	if report {
		s.ev.emit(s.parent, dlock.Event{Kind: dlock.EventRenewFailed, Fence: s.fence, Err: err})
	}
}

func (s *State) state() *State { return s }

// announce records that EventAcquired has been reported, and reports the
// end of the lease if it ended before.
func (s *State) announce() {
	if s.ev == nil {
		return
	}
	s.mu.Lock()
	s.shown, s.shownAt = true, now()
	err := s.err
	s.mu.Unlock()
	if err != nil {
		s.reportEnd(err, 0)
	}
}

// reportEnd reports EventReleased or EventLost.
func (s *State) reportEnd(err error, held time.Duration) {
	kind := dlock.EventLost
	if err == dlock.ErrReleased {
		kind, err = dlock.EventReleased, nil
	}
	s.ev.emit(s.parent, dlock.Event{Kind: kind, Fence: s.fence, Held: held, Err: err})
}

// End ends the lease with err (dlock.ErrReleased, or an error matching
// dlock.ErrLost). Only the first call has an effect; it reports whether
// this call ended the lease. A loss found once Until has passed is the
// expiry's (dlock.ErrExpired, or dlock.ErrMaxHold at the cap), whatever
// was found: the lease had ended by then, though a loaded machine ran its
// expiry late.
func (s *State) End(err error) bool {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return false
	}
	if errors.Is(err, dlock.ErrLost) && now() >= s.until {
		// The lease had run out before this loss was found: a loaded
		// machine ran the expiry late. Its cause is the deadline's.
		err = dlock.Lost(dlock.ErrExpired)
		if s.holdEnd != 0 && s.until >= s.holdEnd {
			err = dlock.Lost(dlock.ErrMaxHold)
		}
	}
	s.err = err
	s.unschedule()
	var cancel context.CancelCauseFunc
	if s.ctx != nil {
		cancel = s.ctx.cancel
		if s.done == nil { // closed after cancel, as below
			s.done = make(chan struct{})
		}
	}
	done := s.done
	report, shownAt := s.shown, s.shownAt
	s.mu.Unlock()
	if cancel != nil {
		cancel(err) // before Done closes, so that a reader woken by Done sees the cause
	}
	if done != nil {
		close(done)
	}
	if s.onEnd != nil {
		s.onEnd()
	}
	if report {
		s.reportEnd(err, time.Duration(now()-shownAt))
	}
	return true
}

// BeginRelease marks the lease as being released, unless it has ended,
// and reports what Ended(true) reports. From then on, Lose does nothing:
// a renewal sent before the release may reach the server after it and
// find the lock gone, and must not end as lost a lease its holder is
// releasing. The release's own reply decides how the lease ends, so a
// backend that calls BeginRelease must end the lease before its Release
// returns.
//
// Only the first call begins a release: a second call made while it is in
// flight waits for the lease to end and reports ended, so that two
// goroutines releasing one lease never both talk to the server.
func (s *State) BeginRelease() (ended bool, err error) {
	s.mu.Lock()
	second := s.releasing && s.err == nil
	if s.err == nil {
		s.releasing = true
	}
	s.mu.Unlock()
	if second {
		<-s.Done()
	}
	return s.Ended(true)
}

// Released ends the lease as released, after its release succeeded on the
// server, and returns nil; or, if it had ended before (it expired while
// the release was in flight), the error a Release of it returns. So a
// Release that returns nil always leaves Err() == dlock.ErrReleased.
func (s *State) Released() error {
	if s.End(dlock.ErrReleased) {
		return nil
	}
	_, err := s.Ended(true)
	return err
}

// Releasing reports whether the holder has asked to release the lease
// (see BeginRelease): a renewal need not be sent for it.
func (s *State) Releasing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.releasing
}

// Lose ends the lease with err, an error matching dlock.ErrLost that a
// renewal or refresh found, after reporting EventRenewFailed with it. It
// does nothing, and reports false, once the lease is being released (see
// BeginRelease) or has ended.
func (s *State) Lose(err error) bool {
	s.mu.Lock()
	skip := s.releasing || s.err != nil
	s.mu.Unlock()
	if skip {
		return false
	}
	s.RenewFailed(err)
	return s.End(err)
}

// Ended reports whether the lease has ended and, if so, the error a
// Release (releasing) or Refresh of it returns: nil for releasing a
// released lease, ErrReleased for refreshing one, otherwise an error
// matching dlock.ErrNotHeld and the reason the lease was lost.
func (s *State) Ended(releasing bool) (ended bool, err error) {
	e := s.Err()
	switch {
	case e == nil:
		return false, nil
	case e == dlock.ErrReleased && releasing:
		return true, nil
	default:
		return true, NotHeld(e)
	}
}

// NotHeld returns the error that a Release or Refresh of a lease that ended
// with reason returns: reason itself for dlock.ErrReleased, otherwise an
// error matching dlock.ErrNotHeld and reason.
func NotHeld(reason error) error {
	if reason == dlock.ErrReleased {
		return reason
	}
	return &notHeldError{reason}
}

type notHeldError struct{ reason error }

func (e *notHeldError) Error() string { return "dlock: lock not held: " + e.reason.Error() }
func (e *notHeldError) Unwrap() []error {
	return []error{dlock.ErrNotHeld, e.reason}
}
