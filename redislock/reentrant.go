package redislock

import (
	"context"

	"github.com/dlock-go/dlock"
)

// A ReentrantMutex is an exclusive lock that its owner may take again
// while holding it, as Redisson's RLock: the lock is a hash of owner to
// hold count. The owner is carried by the context: a lease's Context (so
// code running under a hold can take the lock again), or
// dlock.WithOwner(ctx, id) for an identity of your choosing. A context with
// no owner gets a fresh one, so such calls never re-enter.
//
// Each Lock returns a lease for one hold; releasing it gives up that hold,
// and the lock is free when the owner has released every hold. Re-entering
// takes one round trip and never waits. All holds of an owner share the
// fence of its first hold: the holder has not changed. Another owner's
// Release is refused with dlock.ErrNotHeld. Waiting clients stand in a line
// as a Mutex's do (see Waiting in the package doc): the release of the
// last hold wakes the one that has waited longest. It is not fair.
//
// The owner token is a secret: a Lock whose ctx carries it joins the hold.
// The server keeps only its SHA-1, which is what Inspect shows, so reading
// the lock's keys does not let anyone join.
//
// While it is held, a lock of another kind on the name gets an error
// matching dlock.ErrKindMismatch, and so does a ReentrantMutex on a name
// another kind holds, from Lock as from TryLock.
type ReentrantMutex struct{ m *Mutex }

var _ dlock.Locker = (*ReentrantMutex)(nil)

// NewReentrantMutex returns the reentrant mutex called name. It never
// fails: a bad name or option is reported by Lock and TryLock.
func (c *Client) NewReentrantMutex(name string, opts ...Option) *ReentrantMutex {
	return &ReentrantMutex{c.newMutex(name, reentrant, opts)}
}

// Name returns the lock's name.
func (r *ReentrantMutex) Name() string { return r.m.name }

// Lock takes a hold, waiting while another owner holds the lock; see
// Mutex.Lock.
func (r *ReentrantMutex) Lock(ctx context.Context) (dlock.Lease, error) { return r.m.Lock(ctx) }

// TryLock takes a hold if the lock is free or already the caller's owner's.
func (r *ReentrantMutex) TryLock(ctx context.Context) (dlock.Lease, error) {
	return r.m.TryLock(ctx)
}
