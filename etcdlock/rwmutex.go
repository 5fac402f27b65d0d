package etcdlock

import (
	"context"

	"github.com/dlock-go/dlock"
)

// An RWMutex is a reader/writer lock on a name: any number of readers, or
// one writer, hold it at a time. Readers and writers queue together by
// the create revisions of their keys (name/read/<lease> and
// name/write/<lease>). A writer holds when its key is the oldest, and
// waits for the key just before it; a reader holds when no key but
// readers' is older, and waits for the last such key. So the lock is fair:
// a reader that arrives after a waiting writer waits for it.
//
// Neither side is reentrant: asking again through the Context of a lease
// of the same RWMutex in the same Client returns ErrNotReentrant, or
// ErrUpgrade when a reader asks for the write side. There is no Downgrade.
type RWMutex struct {
	name string
	r, w *side
}

// NewRWMutex returns the reader/writer lock called name. It never fails:
// a bad name or option is reported by the first Lock or TryLock.
func (c *Client) NewRWMutex(name string, opts ...Option) *RWMutex {
	return &RWMutex{name: name, r: &side{newLocker(c, name, kindRead, 0, opts)}, w: &side{newLocker(c, name, kindWrite, 0, opts)}}
}

// Name returns the lock's name.
func (rw *RWMutex) Name() string { return rw.name }

// Reader returns the read side: its leases share the lock with other
// readers.
func (rw *RWMutex) Reader() dlock.Locker { return rw.r }

// Writer returns the write side: its leases hold the lock alone.
func (rw *RWMutex) Writer() dlock.Locker { return rw.w }

// A side is one side of an RWMutex.
type side struct{ lk *locker }

func (s *side) Name() string { return s.lk.name }

func (s *side) Lock(ctx context.Context) (dlock.Lease, error) {
	a := s.lk.ev.Begin(ctx)
	return a.End(s.lk.c.reg.Call(ctx, func(ctx context.Context) (dlock.Lease, error) { return s.lk.acquire(ctx, false, &a) }))
}

func (s *side) TryLock(ctx context.Context) (dlock.Lease, error) {
	a := s.lk.ev.Begin(ctx)
	return a.End(s.lk.c.reg.Call(ctx, func(ctx context.Context) (dlock.Lease, error) { return s.lk.acquire(ctx, true, &a) }))
}
