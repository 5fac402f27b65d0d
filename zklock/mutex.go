package zklock

import (
	"context"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/lease"
)

// A Mutex is an exclusive lock on a ZooKeeper path: each contender creates
// an ephemeral sequential child of the path, and the lowest holds the
// lock. Each waiter watches only the child just ahead of it, so a release
// wakes the next waiter and nobody else, and waiters are served in the
// order they arrived: the Mutex is fair.
//
// It is not reentrant: a Lock or TryLock through the Context of a lease
// of the same path in the same Client returns ErrNotReentrant (see
// ReentrantMutex), and one through an unrelated context waits like
// anyone else.
//
// Its nodes are named like those of Curator's InterProcessMutex and
// go-zookeeper's zk.Lock ("_c_<guid>-lock-<sequence>"), and all three
// exclude each other on one path.
type Mutex struct {
	q         *queue
	reentrant bool
}

var _ dlock.Locker = (*Mutex)(nil)

// A ReentrantMutex is a Mutex that its owner can take again: a Lock or
// TryLock whose ctx carries the owner of a hold of the same path in the
// same Client (a lease's Context, or dlock.WithOwner(ctx, id) with the id
// of an earlier Lock) takes another hold at once, without a round trip.
// Each hold is a lease of its own, with the fence of the first; the node
// is deleted when the last hold is released. Its nodes are a Mutex's, and
// a Mutex and a ReentrantMutex of one path exclude each other.
type ReentrantMutex struct{ m Mutex }

var _ dlock.Locker = (*ReentrantMutex)(nil)

// NewReentrantMutex returns the reentrant mutex on path, with the same
// rules for paths as NewMutex.
func (s *Client) NewReentrantMutex(path string, opts ...Option) *ReentrantMutex {
	q := newQueue(s, path, kindLock, 0, opts, lowestHolds, kindLock)
	q.ev = lease.NewEvents(s.obs, "zklock", path, "ReentrantMutex")
	return &ReentrantMutex{Mutex{q: q, reentrant: true}}
}

// Name returns the lock's path.
func (r *ReentrantMutex) Name() string { return r.m.Name() }

// Lock takes the lock, or another hold of it if ctx carries the owner of
// a hold, waiting until it is free or ctx is done; see Mutex.Lock.
func (r *ReentrantMutex) Lock(ctx context.Context) (dlock.Lease, error) { return r.m.Lock(ctx) }

// TryLock takes the lock if it is free, or another hold of it if ctx
// carries the owner of a hold; see Mutex.TryLock.
func (r *ReentrantMutex) TryLock(ctx context.Context) (dlock.Lease, error) { return r.m.TryLock(ctx) }

// NewMutex returns the mutex on path, an absolute ZooKeeper path such as
// "/locks/nightly-report" that the lock uses for nothing else. It never
// fails: a bad path or option is reported by Lock and TryLock.
func (s *Client) NewMutex(path string, opts ...Option) *Mutex {
	return &Mutex{q: newQueue(s, path, kindLock, 0, opts, lowestHolds, kindLock)}
}

// lowestHolds is the rule of a Mutex and of an RWMutex writer: the lowest
// node holds, and each other node waits for the one just ahead of it.
func lowestHolds(kids []child, me int) verdict {
	if me == 0 {
		return verdict{held: true}
	}
	return verdict{watch: kids[me-1].name}
}

// Name returns the lock's path.
func (m *Mutex) Name() string { return m.q.dir }

// Lock takes the lock, waiting until it is free or ctx is done. If ctx is
// done first, the error matches both dlock.ErrNotObtained and ctx.Err(),
// and the waiter's node is deleted.
func (m *Mutex) Lock(ctx context.Context) (dlock.Lease, error) {
	a := m.q.ev.Begin(ctx)
	return a.End(m.q.s.leases.Call(ctx, func(ctx context.Context) (dlock.Lease, error) { return m.acquire(ctx, true, &a) }))
}

// TryLock takes the lock if it is free. It returns an error matching
// dlock.ErrNotObtained if another owner holds it or waits for it, and one
// matching dlock.ErrUnavailable if the ensemble cannot be reached or does
// not answer within its bound (see Faults in the package doc).
func (m *Mutex) TryLock(ctx context.Context) (dlock.Lease, error) {
	a := m.q.ev.Begin(ctx)
	return a.End(m.q.s.leases.Call(ctx, func(ctx context.Context) (dlock.Lease, error) { return m.acquire(ctx, false, &a) }))
}

func (m *Mutex) acquire(ctx context.Context, wait bool, a *lease.Attempt) (dlock.Lease, error) {
	if err := m.q.check(ctx); err != nil {
		return nil, err
	}
	token := lease.NewToken(ctx)
	if owner, ok := dlock.OwnerFrom(ctx); ok {
		if n := m.q.s.heldBy(m.q.dir, owner); n != nil {
			if n.q.kind != kindLock {
				return nil, kindMismatch(m.q.dir, kindLock, n)
			}
			if !m.reentrant {
				return nil, ErrNotReentrant
			}
			if h := n.reenter(ctx); h != nil {
				if m.q.s.leases.Add(h) {
					return h, nil
				}
				h.End(dlock.Lost(ErrClosed))
				return nil, ErrClosed
			}
		}
		if m.reentrant {
			token = owner
		}
	}
	return asLease(m.q.acquire(ctx, token, wait, a))
}

// asLease keeps a nil *Lease from becoming a non-nil dlock.Lease.
func asLease(h *Lease, err error) (dlock.Lease, error) {
	if h == nil {
		return nil, err
	}
	return h, err
}
