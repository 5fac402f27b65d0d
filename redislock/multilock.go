package redislock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/lease"
)

// A MultiLock takes several locks, all or nothing. The locks may live on
// different Clients, or be of any backend that names its locks. They are
// always taken in the order of their names (and, for the one name of a
// Mutex made WithBareKey and one in dlock's layout, of their keys), so two
// MultiLocks that share locks cannot deadlock each other.
//
// A MultiLock reports no events of its own: each of its locks reports to
// the observer of its own Client (see WithObserver), as if taken alone.
type MultiLock struct {
	locks []dlock.Locker
	err   error
}

var _ dlock.Locker = (*MultiLock)(nil)

// Name returns the names of the locks, in the order they are taken,
// joined by "+": the Key of the MultiLock's leases.
func (ml *MultiLock) Name() string {
	names := make([]string, len(ml.locks))
	for i, l := range ml.locks {
		if l != nil {
			names[i] = l.Name()
		}
	}
	return strings.Join(names, "+")
}

// NewMultiLock returns a MultiLock over locks. It never fails: no locks,
// a nil lock, or one name given twice is reported by Lock and TryLock.
func NewMultiLock(locks ...dlock.Locker) *MultiLock {
	ml := &MultiLock{locks: slices.Clone(locks)}
	if len(locks) == 0 {
		ml.err = errors.New("redislock: NewMultiLock needs at least one lock")
		return ml
	}
	for i, l := range locks {
		if l == nil {
			ml.err = fmt.Errorf("redislock: NewMultiLock: lock %d is nil", i)
			return ml
		}
	}
	slices.SortStableFunc(ml.locks, func(a, b dlock.Locker) int {
		return cmp.Or(cmp.Compare(a.Name(), b.Name()), cmp.Compare(keyOf(a), keyOf(b)))
	})
	for i := 1; i < len(ml.locks); i++ {
		if ml.locks[i].Name() == ml.locks[i-1].Name() && ml.locks[i] == ml.locks[i-1] {
			ml.err = fmt.Errorf("redislock: NewMultiLock: lock %q given twice", ml.locks[i].Name())
			return ml
		}
	}
	return ml
}

// keyOf returns the key a Mutex of this package or of redlock takes,
// which orders locks of one name: a Mutex made WithBareKey and one in
// dlock's layout share their name, and without it two MultiLocks given
// both in opposite orders would take them in those orders, and deadlock.
func keyOf(l dlock.Locker) string {
	if m, ok := l.(*Mutex); ok {
		return m.keys.lock
	}
	return lease.OrderOf(l)
}

// Lock takes every lock, in name order, waiting for each. If one cannot be
// taken, those already taken are released and the error is returned. If a
// lock taken earlier is lost while Lock waits for a later one (its server
// paused past the TTL, say), Lock releases them all and starts again: it
// never returns a lease with a member lost or past its Until.
func (ml *MultiLock) Lock(ctx context.Context) (dlock.Lease, error) {
	return ml.take(ctx, true)
}

// TryLock makes one attempt at each lock; if any is held elsewhere, or one
// taken earlier was lost meanwhile, it releases the others and returns an
// error matching dlock.ErrNotObtained.
func (ml *MultiLock) TryLock(ctx context.Context) (dlock.Lease, error) {
	return ml.take(ctx, false)
}

func (ml *MultiLock) take(ctx context.Context, wait bool) (dlock.Lease, error) {
	if ml.err != nil {
		return nil, ml.err
	}
	for {
		held := make([]dlock.Lease, 0, len(ml.locks))
		for _, l := range ml.locks {
			var lease dlock.Lease
			var err error
			if wait {
				lease, err = l.Lock(ctx)
			} else {
				lease, err = l.TryLock(ctx)
			}
			if err != nil {
				releaseAll(ctx, held)
				return nil, fmt.Errorf("redislock: MultiLock: %q: %w", l.Name(), err)
			}
			held = append(held, lease)
		}
		lost := firstLost(held)
		if lost == nil {
			return newMultiLease(ctx, held), nil
		}
		releaseAll(ctx, held)
		err := fmt.Errorf("redislock: MultiLock: %q was lost while the others were taken", lost.Key())
		if !wait {
			return nil, fmt.Errorf("%w: %w", dlock.ErrNotObtained, err)
		}
		if ctx.Err() != nil {
			return nil, dlock.NotObtained(ctx.Err())
		}
	}
}

// firstLost returns the first of leases that has ended or reached its
// Until, or nil.
func firstLost(leases []dlock.Lease) dlock.Lease {
	now := time.Now()
	for _, l := range leases {
		if l.Err() != nil || !now.Before(l.Until()) {
			return l
		}
	}
	return nil
}

// releaseAll gives up leases, waiting at most five seconds in all.
func releaseAll(ctx context.Context, leases []dlock.Lease) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	for _, h := range leases {
		h.Release(rctx)
	}
}

// A multiLease holds every lease of a MultiLock. It ends when the first of
// them ends.
type multiLease struct {
	leases []dlock.Lease
	key    string
	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{}

	mu  sync.Mutex
	err error
}

func newMultiLease(ctx context.Context, leases []dlock.Lease) *multiLease {
	keys := make([]string, len(leases))
	for i, l := range leases {
		keys[i] = l.Key()
	}
	ml := &multiLease{leases: leases, key: strings.Join(keys, "+"), done: make(chan struct{})}
	ml.ctx, ml.cancel = context.WithCancelCause(dlock.WithOwner(context.WithoutCancel(ctx), ml.Token()))
	for _, l := range leases {
		go ml.watch(l)
	}
	return ml
}

// watch ends the MultiLock's lease when l is lost.
func (ml *multiLease) watch(l dlock.Lease) {
	select {
	case <-l.Done():
		if err := l.Err(); err != dlock.ErrReleased {
			ml.end(fmt.Errorf("%w (lock %q)", err, l.Key()))
		}
	case <-ml.done:
	}
}

func (ml *multiLease) end(err error) {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	if ml.err != nil {
		return
	}
	ml.err = err
	ml.cancel(err)
	close(ml.done)
}

// Key joins the names of the locks with "+".
func (ml *multiLease) Key() string { return ml.key }

// Token is the first lock's token.
func (ml *multiLease) Token() string { return ml.leases[0].Token() }

// Fence is the largest of the locks' fences: it increases whenever every
// one of them does, so it increases across successive holders of the set.
func (ml *multiLease) Fence() uint64 {
	var f uint64
	for _, l := range ml.leases {
		f = max(f, l.Fence())
	}
	return f
}

// Until is the earliest of the locks' deadlines.
func (ml *multiLease) Until() time.Time {
	u := ml.leases[0].Until()
	for _, l := range ml.leases[1:] {
		if l.Until().Before(u) {
			u = l.Until()
		}
	}
	return u
}

func (ml *multiLease) Done() <-chan struct{}    { return ml.done }
func (ml *multiLease) Context() context.Context { return ml.ctx }

func (ml *multiLease) Err() error {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	return ml.err
}

// Leases returns the lease of each lock, in name order.
func (ml *multiLease) Leases() []dlock.Lease { return slices.Clone(ml.leases) }

// Refresh refreshes every lock.
func (ml *multiLease) Refresh(ctx context.Context) error {
	var errs []error
	for _, l := range ml.leases {
		if err := l.Refresh(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Release releases every lock; it returns the errors of those that failed.
func (ml *multiLease) Release(ctx context.Context) error {
	var errs []error
	for _, l := range ml.leases {
		if err := l.Release(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	ml.end(dlock.ErrReleased)
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := ml.Err(); err != dlock.ErrReleased {
		return err
	}
	return nil
}
