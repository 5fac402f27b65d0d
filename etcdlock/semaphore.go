package etcdlock

import (
	"context"

	"github.com/dlock-go/dlock"
)

// A Semaphore hands out up to n leases at a time on a name, in the order
// they were asked for. Each lease is a key name/permits-<n>/<lease> on an
// etcd lease of its own, with a fence of its own; the n oldest keys hold.
// A waiter watches every key of the name, so each release wakes every
// waiter, which counts the keys ahead of its own again (a semaphore waiter
// cannot tell from one key whether it may go).
//
// Every key's name carries n; a Semaphore on a name held by a semaphore
// of another n returns at once an error naming both. Once queued, a
// permit treats a key of another n as another kind of lock's: it waits for
// one ahead of it, as an attempt leaves it until it is refused. It is not
// reentrant: a holder that asks again takes another lease.
type Semaphore struct{ lk *locker }

var _ dlock.Locker = (*Semaphore)(nil)

// NewSemaphore returns the semaphore of n leases called name. It never
// fails: a bad name, n or option is reported by Lock and TryLock.
func (c *Client) NewSemaphore(name string, n int, opts ...Option) *Semaphore {
	return &Semaphore{newLocker(c, name, kindPermit, n, opts)}
}

// Name returns the semaphore's name.
func (sem *Semaphore) Name() string { return sem.lk.name }

// Permits returns n, the number of leases the semaphore hands out at once.
func (sem *Semaphore) Permits() int { return sem.lk.n }

// Lock takes one lease, waiting until one is free or ctx is done.
func (sem *Semaphore) Lock(ctx context.Context) (dlock.Lease, error) {
	a := sem.lk.ev.Begin(ctx)
	return a.End(sem.lk.c.reg.Call(ctx, func(ctx context.Context) (dlock.Lease, error) { return sem.lk.acquire(ctx, false, &a) }))
}

// TryLock takes one lease if one is free. It returns an error matching
// dlock.ErrNotObtained otherwise.
func (sem *Semaphore) TryLock(ctx context.Context) (dlock.Lease, error) {
	a := sem.lk.ev.Begin(ctx)
	return a.End(sem.lk.c.reg.Call(ctx, func(ctx context.Context) (dlock.Lease, error) { return sem.lk.acquire(ctx, true, &a) }))
}
