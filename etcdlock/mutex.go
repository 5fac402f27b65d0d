package etcdlock

import (
	"context"

	"github.com/dlock-go/dlock"
)

// A Mutex is an exclusive lock on a name. Each contender puts a key
// name/<lease ID in hex> on an etcd lease of its own; the key with the
// lowest create revision holds the lock. Each waiter watches only the key
// created just before its own, so a release wakes the next waiter and
// nobody else, and waiters are served in the order they arrived: the Mutex
// is fair.
//
// The keys are those of etcd's concurrency.Mutex on the same prefix, so a
// Mutex and a concurrency.Mutex exclude each other.
//
// It is not reentrant: a Lock or TryLock through the Context of a Mutex's
// lease (or an Election's) of the same name in the same Client returns
// ErrNotReentrant; through a lease of another kind of lock on the name, an
// error matching ErrKindMismatch, as for any holder of another kind.
type Mutex struct{ lk *locker }

var _ dlock.Locker = (*Mutex)(nil)

// NewMutex returns the mutex called name, the prefix of its keys without
// the trailing slash (what concurrency.NewMutex takes). It never fails: a
// bad name or option is reported by Lock and TryLock.
func (c *Client) NewMutex(name string, opts ...Option) *Mutex {
	return &Mutex{newLocker(c, name, kindMutex, 0, opts)}
}

// Name returns the lock's name.
func (m *Mutex) Name() string { return m.lk.name }

// Lock takes the lock, waiting until it is free or ctx is done. If ctx is
// done first, the error matches both dlock.ErrNotObtained and ctx.Err(),
// and the waiter's key is deleted.
func (m *Mutex) Lock(ctx context.Context) (dlock.Lease, error) {
	a := m.lk.ev.Begin(ctx)
	return a.End(m.lk.c.reg.Call(ctx, func(ctx context.Context) (dlock.Lease, error) { return m.lk.acquire(ctx, false, &a) }))
}

// TryLock takes the lock if it is free. It returns an error matching
// dlock.ErrNotObtained if another owner holds it or waits for it, and one
// matching dlock.ErrUnavailable if the cluster cannot be reached or does
// not answer within its bound (see Faults in the package doc).
func (m *Mutex) TryLock(ctx context.Context) (dlock.Lease, error) {
	a := m.lk.ev.Begin(ctx)
	return a.End(m.lk.c.reg.Call(ctx, func(ctx context.Context) (dlock.Lease, error) { return m.lk.acquire(ctx, true, &a) }))
}
