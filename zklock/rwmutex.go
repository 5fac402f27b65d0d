package zklock

import (
	"context"
	"errors"
	"fmt"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/lease"
	"github.com/go-zookeeper/zk"
)

// An RWMutex is a reader/writer lock on a ZooKeeper path: any number of
// readers, or one writer, hold it at a time. Readers and writers queue
// together, as ephemeral sequential children of the path. A writer holds
// when its node is the lowest, and waits for the node just ahead of it; a
// reader holds when no writer's node is ahead of it, and waits for the
// last writer ahead. So the lock is fair: a reader that arrives after a
// waiting writer waits for it, and a stream of readers cannot starve a
// writer.
//
// Downgrade turns a write lease into a read lease without letting anyone
// in between. Neither side is reentrant: asking again through the Context
// of a lease of the same RWMutex in the same Client returns
// ErrNotReentrant, or ErrUpgrade when a reader asks for the write side.
// Every grant has its own fence; a downgraded lease keeps its writer's.
type RWMutex struct {
	s              *Client
	reader, writer *queue
}

// NewRWMutex returns the reader/writer lock on path. It never fails: a bad
// path or option is reported by the first Lock, TryLock or Downgrade.
func (s *Client) NewRWMutex(path string, opts ...Option) *RWMutex {
	return &RWMutex{s: s,
		reader: newQueue(s, path, kindRead, 0, opts, readerHolds, kindRead, kindWrite),
		writer: newQueue(s, path, kindWrite, 0, opts, lowestHolds, kindRead, kindWrite)}
}

// readerHolds is the rule of an RWMutex reader: it holds unless a writer
// is ahead of it, and waits for the last writer ahead. That writer may have
// been downgraded, which lets the reader in: a downgraded writer held the
// lock, so it was the lowest node and has no writer ahead of it.
func readerHolds(kids []child, me int) verdict {
	for i := me - 1; i >= 0; i-- {
		if kids[i].kind == kindWrite {
			return verdict{watch: kids[i].name, downgradable: true}
		}
	}
	return verdict{held: true}
}

// Name returns the lock's path.
func (rw *RWMutex) Name() string { return rw.writer.dir }

// Reader returns the read side: its leases share the lock with other
// readers.
func (rw *RWMutex) Reader() dlock.Locker { return rwSide{rw, rw.reader} }

// Writer returns the write side: its leases hold the lock alone.
func (rw *RWMutex) Writer() dlock.Locker { return rwSide{rw, rw.writer} }

type rwSide struct {
	rw *RWMutex
	q  *queue
}

// Name returns the RWMutex's path.
func (s rwSide) Name() string { return s.rw.Name() }

// Lock takes this side of the lock, waiting until it can or ctx is done.
func (s rwSide) Lock(ctx context.Context) (dlock.Lease, error) {
	a := s.q.ev.Begin(ctx)
	return a.End(s.q.s.leases.Call(ctx, func(ctx context.Context) (dlock.Lease, error) { return s.acquire(ctx, true, &a) }))
}

// TryLock takes this side of the lock if it can at once. It returns an
// error matching dlock.ErrNotObtained otherwise.
func (s rwSide) TryLock(ctx context.Context) (dlock.Lease, error) {
	a := s.q.ev.Begin(ctx)
	return a.End(s.q.s.leases.Call(ctx, func(ctx context.Context) (dlock.Lease, error) { return s.acquire(ctx, false, &a) }))
}

func (s rwSide) acquire(ctx context.Context, wait bool, a *lease.Attempt) (dlock.Lease, error) {
	if err := s.q.check(ctx); err != nil {
		return nil, err
	}
	if owner, ok := dlock.OwnerFrom(ctx); ok {
		if n := s.q.s.heldBy(s.q.dir, owner); n != nil {
			if n.q.kind != kindRead && n.q.kind != kindWrite {
				return nil, kindMismatch(s.q.dir, s.q.kind, n)
			}
			n.mu.Lock()
			read := n.read
			n.mu.Unlock()
			if read && s.q.kind == kindWrite {
				return nil, ErrUpgrade
			}
			return nil, ErrNotReentrant
		}
	}
	return asLease(s.q.acquire(ctx, lease.NewToken(ctx), wait, a))
}

// Downgrade turns writeLease, a held write lease of rw, into a read lease
// in one step: the writer's node is marked as a reader's (its data version
// goes from 0 to 1), so no writer can get in between, and the readers
// waiting for it are woken. writeLease then ends with dlock.ErrReleased.
// If it had been lost, Downgrade returns an error matching
// dlock.ErrNotHeld. Treat writeLease as read-only from the call on:
// readers may come in as soon as the ensemble has the mark, before
// Downgrade returns. If the outcome is unknown (ctx ended, or the
// connection failed, before the answer), writeLease ends with
// dlock.ErrLost and its node is deleted, since readers may be in. An
// observer sees the write lease end and an acquisition of the read side
// (EventAcquiring, then EventAcquired or EventNotAcquired).
func (rw *RWMutex) Downgrade(ctx context.Context, writeLease dlock.Lease) (dlock.Lease, error) {
	a := rw.reader.ev.Begin(ctx)
	return a.End(rw.downgrade(ctx, writeLease))
}

func (rw *RWMutex) downgrade(ctx context.Context, writeLease dlock.Lease) (dlock.Lease, error) {
	if err := rw.writer.check(ctx); err != nil {
		return nil, err
	}
	w, ok := writeLease.(*Lease)
	if !ok || w.n.q != rw.writer {
		return nil, fmt.Errorf("zklock: Downgrade of %s needs a write lease of the same RWMutex", rw.writer.dir)
	}
	if ended, err := w.Ended(false); ended {
		return nil, err
	}
	n := w.n
	_, err := rw.s.set(ctx, n.path, []byte(n.token), 0)
	switch {
	case errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrBadVersion):
		n.lose(dlock.ErrTakenOver)
		_, err := w.Ended(false)
		return nil, err
	case errors.Is(err, zk.ErrSessionExpired):
		n.lose(ErrSessionExpired)
		_, err := w.Ended(false)
		return nil, err
	case err != nil:
		// The mark may yet land and let readers in: the write lease cannot
		// stand. End it, and delete the node.
		n.lose(fmt.Errorf("zklock: the outcome of a Downgrade is unknown: %w", err))
		n.q.s.removeLater(n.path)
		return nil, describe("downgrading", n.path, err)
	}
	n.mu.Lock()
	if n.closing {
		n.mu.Unlock()
		if _, err := w.Ended(false); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("zklock: Downgrade of %s: the write lease is being released or was lost: %w", n.path, dlock.ErrNotHeld)
	}
	n.read = true
	r := n.addHoldLocked(ctx, w.Until(), rw.reader.ev)
	n.mu.Unlock()
	if !rw.s.leases.Add(r) {
		r.End(dlock.Lost(ErrClosed))
		return nil, ErrClosed
	}
	w.End(dlock.ErrReleased)
	return r, nil
}
