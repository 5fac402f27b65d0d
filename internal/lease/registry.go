package lease

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
)

// A Releasable is a lease that a Registry can release on Close: a
// backend's lease, which embeds a *State.
type Releasable interface {
	Token() string
	Key() string
	End(err error) bool
	Release(ctx context.Context) error
	state() *State
}

// A Registry is a client's set of held leases, and whether the client is
// closed. Several leases may share a token (the holds of a reentrant lock).
type Registry struct {
	mu sync.Mutex
	// held is every lease held, in no order; each one's State.held is
	// its index.
	held    []Releasable
	byToken map[string]Releasable // the latest lease added for each token
	peak    int                   // the most leases held since byToken was made
	closed  bool
	cause   error // Close's cause, once closed

	calls map[*call]struct{} // Lock and TryLock calls under way (Begin)
	idle  chan struct{}      // closed when Close finds or leaves no call under way
}

// A call is one Lock or TryLock call under way, and its context (see
// Begin). A lease made with that context keeps parent, the caller's
// context, for its values, and not the call's cancellation (see New).
type call struct {
	context.Context
	parent context.Context
	cancel context.CancelCauseFunc
}

// Begin registers a Lock or TryLock call under way. It returns the context
// the call is to use, which is ctx, also cancelled with Close's cause when
// Close begins (at once if it has begun), and end, which the call must
// run on its way out with its error: end returns that error, or, if the
// call ended because Close began and ctx itself is not done, an error
// matching both dlock.ErrNotObtained and Close's cause. Close waits for the
// calls under way to end before it releases the leases still held. The
// context is cancelled when end runs: work that the call leaves running
// must not use it.
func (r *Registry) Begin(ctx context.Context) (_ context.Context, end func(error) error) {
	cctx, cancel := context.WithCancelCause(ctx)
	c := &call{Context: cctx, parent: ctx, cancel: cancel}
	registered := true
	r.mu.Lock()
	if r.closed {
		cancel(r.cause)
		registered = false
	} else {
		if r.calls == nil {
			r.calls = make(map[*call]struct{})
		}
		r.calls[c] = struct{}{}
	}
	r.mu.Unlock()
	return c, func(err error) error {
		if registered {
			r.mu.Lock()
			delete(r.calls, c)
			if r.closed && len(r.calls) == 0 && r.idle != nil {
				close(r.idle)
				r.idle = nil
			}
			r.mu.Unlock()
		}
		closed := cctx.Err() != nil && ctx.Err() == nil
		cause := context.Cause(cctx)
		cancel(nil)
		if err == nil || !closed || cause == nil {
			return err
		}
		if errors.Is(err, dlock.ErrNotObtained) && errors.Is(err, cause) {
			return err
		}
		return dlock.NotObtained(cause)
	}
}

// Call runs f, the body of a Lock or TryLock call, with the context and
// the error that Begin gives it.
func (r *Registry) Call(ctx context.Context, f func(context.Context) (dlock.Lease, error)) (dlock.Lease, error) {
	ctx, end := r.Begin(ctx)
	l, err := f(ctx)
	return l, end(err)
}

// Add records l as held. It reports false if the registry is closed. A
// lease that has ended already (its Until was past when the backend
// started it) is not recorded: its onEnd, which Removes it, has run or
// runs without it.
func (r *Registry) Add(l Releasable) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	if r.byToken == nil {
		r.byToken = make(map[string]Releasable)
	}
	st := l.state()
	if st.held >= 0 || st.Err() != nil { // added before, or ended
		return true
	}
	st.held = int32(len(r.held))
	r.held = append(r.held, l)
	r.byToken[l.Token()] = l
	r.peak = max(r.peak, len(r.held))
	return true
}

// Remove forgets l. Go maps do not shrink, so once most leases of a large
// peak are gone, the map and the slice are made again at their new size.
func (r *Registry) Remove(l Releasable) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := l.state()
	i := int(st.held)
	if i < 0 || i >= len(r.held) || r.held[i] != l {
		return
	}
	last := len(r.held) - 1
	r.held[i] = r.held[last]
	r.held[i].state().held = int32(i)
	r.held[last] = nil
	r.held = r.held[:last]
	st.held = -1
	if r.byToken[l.Token()] == l {
		delete(r.byToken, l.Token())
	}
	if n := len(r.held); r.peak >= 1024 && n <= r.peak/8 {
		byToken := make(map[string]Releasable, len(r.byToken))
		for t, l := range r.byToken {
			byToken[t] = l
		}
		r.held, r.byToken, r.peak = append([]Releasable(nil), r.held...), byToken, n
	}
}

// Held returns the held lease whose owner token ctx carries, or nil.
func (r *Registry) Held(ctx context.Context) Releasable {
	owner, ok := dlock.OwnerFrom(ctx)
	if !ok {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byToken[owner]
}

// Holds reports whether ctx carries the owner token of a held lease on key.
func (r *Registry) Holds(ctx context.Context, key string) bool {
	owner, ok := dlock.OwnerFrom(ctx)
	if !ok {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.byToken[owner]
	return l != nil && l.Key() == key
}

// Closed reports whether Close has been called.
func (r *Registry) Closed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// Close marks the registry closed, cancels the contexts of the calls
// under way (Begin) with cause and waits for them to end, then releases
// every lease still held, waiting at most timeout in all. A lease that
// cannot be released ends with dlock.ErrLost wrapping cause, and its
// Release's error is among those Close returns. A lease found lost
// instead (its Release returns an error matching dlock.ErrNotHeld) is
// not: there was nothing to release, and its Done and Err report the
// loss. So is a lease that ended an instant before Close, while its onEnd
// had yet to Remove it. Close reports false, and does nothing, if the
// registry was already closed.
func (r *Registry) Close(timeout time.Duration, cause error) (bool, error) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return false, nil
	}
	r.closed, r.cause = true, cause
	idle := make(chan struct{})
	if len(r.calls) == 0 {
		close(idle)
	} else {
		r.idle = idle
	}
	for c := range r.calls {
		c.cancel(cause)
	}
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	select {
	case <-idle:
	case <-ctx.Done():
	}
	r.mu.Lock()
	held := append([]Releasable(nil), r.held...)
	r.mu.Unlock()
	var errs []error
	for _, l := range held {
		if err := l.Release(ctx); err != nil && !errors.Is(err, dlock.ErrNotHeld) {
			l.End(dlock.Lost(cause))
			errs = append(errs, err)
		}
	}
	return true, errors.Join(errs...)
}
