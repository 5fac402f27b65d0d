package lease

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
)

// Events is where the events of one lock go: the observer its client was
// given, with the backend's package name and the lock's name (as the
// caller gave it) and kind. Every lock
// makes one with NewEvents and hands it to its leases through New.
//
// A nil *Events reports nothing: with no observer configured, every event
// costs one nil check and no allocation.
type Events struct {
	obs                 dlock.Observer
	cobs                dlock.ContextObserver // obs, if it wants contexts
	backend, name, kind string
}

// NewEvents returns the Events of the lock called name of the given kind
// ("Mutex", "RWMutex.read", ...) of the backend package backend
// ("redislock"), or nil if obs is nil.
func NewEvents(obs dlock.Observer, backend, name, kind string) *Events {
	if obs == nil {
		return nil
	}
	cobs, _ := obs.(dlock.ContextObserver)
	return &Events{obs: obs, cobs: cobs, backend: backend, name: name, kind: kind}
}

// Observer returns the observer of a client given WithObserver(obs) and
// WithLogger(log): both, either or neither (nil). A nil log means no
// logging, not slog.Default().
func Observer(obs dlock.Observer, log *slog.Logger) dlock.Observer {
	var logged dlock.Observer
	if log != nil {
		logged = dlock.LogObserver(log)
	}
	return dlock.Observers(obs, logged)
}

// emit fills in the backend and the lock's name and kind and passes e to
// the observer, with ctx if it is a dlock.ContextObserver. The caller must
// hold no mutex: an observer may call back into the lease.
func (ev *Events) emit(ctx context.Context, e dlock.Event) {
	e.Backend, e.Name, e.Lock = ev.backend, ev.name, ev.kind
	if ev.cobs != nil {
		if ctx == nil {
			ctx = context.Background()
		}
		ev.cobs.ObserveContext(ctx, e)
		return
	}
	ev.obs.Observe(e)
}

// An Attempt reports one Lock or TryLock call: EventAcquiring when it
// begins, EventWaiting at most once, and EventAcquired or EventNotAcquired
// when it ends. The zero Attempt reports nothing.
type Attempt struct {
	ev     *Events
	ctx    context.Context
	start  time.Time
	waited bool
}

// Begin reports EventAcquiring and returns the Attempt that reports the
// rest of the call; ctx is the call's, given to a dlock.ContextObserver
// with each of its events.
func (ev *Events) Begin(ctx context.Context) Attempt {
	if ev == nil {
		return Attempt{}
	}
	a := Attempt{ev: ev, ctx: ctx, start: time.Now()}
	ev.emit(ctx, dlock.Event{Kind: dlock.EventAcquiring})
	return a
}

// Waiting reports EventWaiting, the first time it is called: the call found
// the lock taken and is about to wait for it.
func (a *Attempt) Waiting() {
	if a.ev == nil || a.waited {
		return
	}
	a.waited = true
	a.ev.emit(a.ctx, dlock.Event{Kind: dlock.EventWaiting, Wait: time.Since(a.start)})
}

// End reports how the call ended, and returns l and err unchanged so that
// a Lock method can end with "return a.End(...)". A nil l (or one holding a
// nil pointer) with a nil err counts as dlock.ErrNotObtained. A lease made
// by New reports its own events (renewals, loss, release) only once End has
// reported it acquired.
func (a *Attempt) End(l dlock.Lease, err error) (dlock.Lease, error) {
	if a.ev == nil {
		return l, err
	}
	wait := time.Since(a.start)
	if err != nil || l == nil {
		e := err
		if e == nil {
			e = dlock.ErrNotObtained
		}
		a.ev.emit(a.ctx, dlock.Event{Kind: dlock.EventNotAcquired, Wait: wait, Err: e, Waited: a.waited})
		return l, err
	}
	a.ev.emit(a.ctx, dlock.Event{Kind: dlock.EventAcquired, Fence: l.Fence(), Wait: wait, Waited: a.waited})
	if s, ok := l.(interface{ state() *State }); ok {
		s.state().announce()
	}
	return l, err
}

// causes are the short words, for metric labels, of the causes that end
// leases: the root package's (dlock.ErrClosed is every backend's
// ErrClosed), and those backends add with RegisterCause.
var causes = struct {
	sync.RWMutex
	list []cause
}{list: []cause{{dlock.ErrExpired, "expired"}, {dlock.ErrTakenOver, "taken_over"}, {dlock.ErrClosed, "closed"}}}

type cause struct {
	err  error
	word string
}

// RegisterCause records word ("closed", "session_expired") as the cause
// label of a lease lost with an error matching err. Backends call it from
// init for their own sentinel errors, so that package dlockprom can name
// their causes without importing them.
func RegisterCause(err error, word string) {
	causes.Lock()
	defer causes.Unlock()
	causes.list = append(causes.list, cause{err, word})
}

// Cause returns the short word of the first registered cause that err
// matches under errors.Is: "expired", "taken_over", a word a backend
// registered, or "other".
func Cause(err error) string {
	causes.RLock()
	defer causes.RUnlock()
	for _, c := range causes.list {
		if errors.Is(err, c.err) {
			return c.word
		}
	}
	return "other"
}
