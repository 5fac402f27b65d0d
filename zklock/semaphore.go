package zklock

import (
	"context"
	"fmt"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/lease"
)

// A Semaphore hands out up to n leases at a time on a ZooKeeper path, in
// the order they were asked for. Each lease is an ephemeral sequential
// node of its own, so a client that dies gives its leases back when its
// session ends, and each lease has a fence of its own. The first n nodes
// hold; a waiter lists the path's children with a watch, so every change
// wakes every waiter (a semaphore waiter cannot tell from one node whether
// it may go).
//
// Every node's name carries n; a Semaphore on a path held by a semaphore
// of another n returns at once an error naming both. Once queued, a node
// treats a semaphore of another n as another kind of lock (see Kinds in
// the package documentation): it waits for such a node ahead of it, as an
// attempt leaves it until it is refused, and ignores one behind it. It is
// not reentrant: a holder that asks again takes another lease.
type Semaphore struct{ q *queue }

var _ dlock.Locker = (*Semaphore)(nil)

// NewSemaphore returns the semaphore of n leases on path. It never fails:
// a bad path, n or option is reported by Lock and TryLock.
func (s *Client) NewSemaphore(path string, n int, opts ...Option) *Semaphore {
	q := newQueue(s, path, kindPermit, n, opts, func(kids []child, me int) verdict {
		if me < n {
			return verdict{held: true}
		}
		return verdict{children: true}
	}, kindPermit)
	if n < 1 && q.err == nil {
		q.err = fmt.Errorf("zklock: semaphore %s needs at least 1 lease; got %d", path, n)
	}
	return &Semaphore{q}
}

// Name returns the semaphore's path.
func (sem *Semaphore) Name() string { return sem.q.dir }

// Permits returns n, the number of leases the semaphore hands out at once.
func (sem *Semaphore) Permits() int { return sem.q.permits }

// Lock takes one lease, waiting until one is free or ctx is done.
func (sem *Semaphore) Lock(ctx context.Context) (dlock.Lease, error) {
	a := sem.q.ev.Begin()
	return a.End(sem.q.s.leases.Call(ctx, func(ctx context.Context) (dlock.Lease, error) { return sem.acquire(ctx, true, &a) }))
}

// TryLock takes one lease if one is free. It returns an error matching
// dlock.ErrNotObtained otherwise.
func (sem *Semaphore) TryLock(ctx context.Context) (dlock.Lease, error) {
	a := sem.q.ev.Begin()
	return a.End(sem.q.s.leases.Call(ctx, func(ctx context.Context) (dlock.Lease, error) { return sem.acquire(ctx, false, &a) }))
}

func (sem *Semaphore) acquire(ctx context.Context, wait bool, a *lease.Attempt) (dlock.Lease, error) {
	if err := sem.q.check(ctx); err != nil {
		return nil, err
	}
	return asLease(sem.q.acquire(ctx, lease.NewToken(ctx), wait, a))
}
