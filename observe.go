package dlock

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/dlock-go/dlock/internal/vocab"
)

// An EventKind says what happened to a lock.
type EventKind uint8

// The kinds of Event, in the order a lease meets them.
const (
	// EventAcquiring: a Lock or TryLock call began.
	EventAcquiring EventKind = iota + 1
	// EventWaiting: a Lock call found the lock taken and began to wait.
	// It comes at most once per call.
	EventWaiting
	// EventAcquired: the call obtained a lease. Wait is the time since
	// EventAcquiring; Fence is the lease's fence.
	EventAcquired
	// EventNotAcquired: the call gave up. Wait is the time since
	// EventAcquiring; Err says why (it matches ErrNotObtained when the lock
	// was taken or ctx ended, and is a hard error otherwise).
	EventNotAcquired
	// EventRenewed: the lease was extended, by the watchdog or by Refresh.
	EventRenewed
	// EventRenewFailed: an attempt to extend the lease failed (Err says
	// why). The lease may still be valid; if it is not, EventLost follows.
	EventRenewFailed
	// EventLost: the lease ended other than by Release. Err matches ErrLost
	// and wraps the cause; Held is the time since EventAcquired.
	EventLost
	// EventReleased: the holder released the lease. Held is the time since
	// EventAcquired.
	EventReleased
	// EventFenceAccepted: a guard of package fence accepted a write. Name
	// is the resource written, Lock the guard ("SQL", "Row", "Redis",
	// "Memory") and Fence the write's fence.
	EventFenceAccepted
	// EventFenceRefused: a guard of package fence refused a write whose
	// fence was stale; Err is the *fence.StaleError, which gives the
	// newest fence. A lease outlived by its holder's work shows here. A
	// guard made with fence.WithMaxJump also refuses a fence too far
	// above the newest: Err is then a *fence.TooHighError.
	EventFenceRefused
	// EventFenceReset: an operator reset a guard's record of the newest
	// fence of a resource (package fence's Reset). Name is the resource,
	// Lock the guard, Fence the fence recorded now (0 if the record was
	// removed) and Previous the one recorded before.
	EventFenceReset
)

var eventNames = [...]string{
	EventAcquiring:     "acquiring",
	EventWaiting:       "waiting",
	EventAcquired:      "acquired",
	EventNotAcquired:   "not-acquired",
	EventRenewed:       "renewed",
	EventRenewFailed:   "renew-failed",
	EventLost:          "lost",
	EventReleased:      "released",
	EventFenceAccepted: "fence-accepted",
	EventFenceRefused:  "fence-refused",
	EventFenceReset:    "fence-reset",
}

// String returns the kind's name in lower case, such as "acquired".
func (k EventKind) String() string {
	if int(k) < len(eventNames) && eventNames[k] != "" {
		return eventNames[k]
	}
	return "EventKind(" + strconv.Itoa(int(k)) + ")"
}

// An Event is one thing that happened to one lock.
type Event struct {
	Kind EventKind
	// Name is the lock's name as the caller gave it to the backend
	// (without any key prefix), the label to group events by.
	Name string
	// Lock is the kind of lock, such as "Mutex", "FairMutex", "RWMutex.read"
	// or "Semaphore". LogObserver's logs and package dlockprom's kind label
	// show it in the words of dlock run --kind: "mutex", "fair", "read".
	Lock string
	// Backend is the package of the backend that reported the event, such
	// as "redislock" or "pglock"; empty for the events of package fence.
	Backend string
	// Fence is the lease's fence; zero before EventAcquired.
	Fence uint64
	// Wait is how long the acquisition took (EventAcquired,
	// EventNotAcquired).
	Wait time.Duration
	// Held is how long the lease was held (EventLost, EventReleased).
	Held time.Duration
	// Waited reports, on EventAcquired and EventNotAcquired, whether the
	// call reported EventWaiting first: an observer that counts waiters
	// pairs each EventWaiting with the end of its call by it.
	Waited bool
	// Err is the cause of EventNotAcquired, EventRenewFailed and
	// EventLost.
	Err error
	// Previous is, on EventFenceReset, the fence recorded before the
	// reset.
	Previous uint64
}

// An Observer is told about lock events. Backends call Observe
// synchronously, on whatever goroutine the event happens (a caller's, or
// the watchdog's), so it must be quick, must not block and must not call
// back into the lock; it must be safe for concurrent use.
//
// Each backend takes an Observer as a client option (redislock.WithObserver,
// redlock.WithObserver, zklock.WithObserver, pglock.WithObserver). Package dlockprom turns
// events into Prometheus metrics, package dlockotel into OpenTelemetry
// spans and metrics; LogObserver logs them.
type Observer interface {
	Observe(Event)
}

// A ContextObserver is an Observer that is also given the context an
// event belongs to. Backends call ObserveContext, rather than Observe, on
// an Observer that implements it: for the events of a Lock or TryLock call
// (EventAcquiring to EventAcquired or EventNotAcquired) with the call's
// ctx, and for those of the lease it obtained (EventRenewed to
// EventReleased or EventLost) with a context that has the values of that
// ctx but not its cancellation. A tracing observer finds the caller's span
// there; a logger, the values its handler logs. The rules of Observe apply.
type ContextObserver interface {
	Observer
	ObserveContext(ctx context.Context, e Event)
}

// ObserverFunc adapts a function to the Observer interface.
type ObserverFunc func(Event)

// Observe calls f(e).
func (f ObserverFunc) Observe(e Event) { f(e) }

// Observers returns an Observer that passes each event to every one of
// obs in turn, skipping nils. It returns nil if there are none.
func Observers(obs ...Observer) Observer {
	var list multiObserver
	for _, o := range obs {
		if o != nil {
			list = append(list, o)
		}
	}
	switch len(list) {
	case 0:
		return nil
	case 1:
		return list[0]
	}
	return list
}

type multiObserver []Observer

func (m multiObserver) Observe(e Event) {
	for _, o := range m {
		o.Observe(e)
	}
}

func (m multiObserver) ObserveContext(ctx context.Context, e Event) {
	for _, o := range m {
		if co, ok := o.(ContextObserver); ok {
			co.ObserveContext(ctx, e)
		} else {
			o.Observe(e)
		}
	}
}

// LogObserver returns an Observer that logs every event to l: losses,
// refused fences and reset ones at Warn, failed renewals and failed acquisitions with a hard error at Info,
// and everything else at Debug. A nil l means slog.Default(). It is a
// ContextObserver: l's handler is given the context of each event.
func LogObserver(l *slog.Logger) Observer {
	if l == nil {
		l = slog.Default()
	}
	return logObserver{l}
}

// A logObserver logs each event with the attributes lock (Event.Name),
// kind, fence, previous, wait, held and err. The kind is in the words of
// dlock run --kind and of dlockprom's kind label (package vocab): "mutex",
// "fair", "read", "write", "semaphore", "reentrant" (a ReentrantMutex),
// "session" (a SessionMutex), and a fence guard's name in lower case.
type logObserver struct{ l *slog.Logger }

func (o logObserver) Observe(e Event) { o.ObserveContext(context.Background(), e) }

func (o logObserver) ObserveContext(ctx context.Context, e Event) {
	level := slog.LevelDebug
	switch e.Kind {
	case EventLost, EventFenceRefused, EventFenceReset:
		level = slog.LevelWarn
	case EventRenewFailed:
		level = slog.LevelInfo
	case EventNotAcquired:
		if !errors.Is(e.Err, ErrNotObtained) {
			level = slog.LevelInfo
		}
	}
	if !o.l.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{slog.String("lock", e.Name), slog.String("kind", vocab.Kind(e.Lock))}
	if e.Fence != 0 || e.Kind == EventFenceReset {
		attrs = append(attrs, slog.Uint64("fence", e.Fence))
	}
	if e.Kind == EventFenceReset {
		attrs = append(attrs, slog.Uint64("previous", e.Previous))
	}
	if e.Kind == EventAcquired || e.Kind == EventNotAcquired {
		attrs = append(attrs, slog.Duration("wait", e.Wait))
	}
	if e.Kind == EventLost || e.Kind == EventReleased {
		attrs = append(attrs, slog.Duration("held", e.Held))
	}
	if e.Err != nil {
		attrs = append(attrs, slog.String("err", e.Err.Error()))
	}
	o.l.LogAttrs(ctx, level, "dlock: "+e.Kind.String(), attrs...)
}
