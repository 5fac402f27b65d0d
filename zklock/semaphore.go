package zklock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/lease"
	"github.com/go-zookeeper/zk"
)

// A Semaphore hands out up to n leases at a time on a ZooKeeper path, in
// the order they were asked for. Each lease is an ephemeral sequential
// node of its own, so a client that dies gives its leases back when its
// session ends, and each lease has a fence of its own. The first n nodes
// hold; a waiter lists the path's children with a watch, so every change
// wakes every waiter (a semaphore waiter cannot tell from one node whether
// it may go).
//
// Each lease also holds a lease of Curator's InterProcessSemaphoreV2
// layout under path/leases, so that a Curator semaphore of n leases on
// the same path and this one never have more than n holders together (see
// Apache Curator in the package documentation).
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
	a := sem.q.ev.Begin(ctx)
	return a.End(sem.q.s.leases.Call(ctx, func(ctx context.Context) (dlock.Lease, error) { return sem.acquire(ctx, true, &a) }))
}

// TryLock takes one lease if one is free. It returns an error matching
// dlock.ErrNotObtained otherwise.
func (sem *Semaphore) TryLock(ctx context.Context) (dlock.Lease, error) {
	a := sem.q.ev.Begin(ctx)
	return a.End(sem.q.s.leases.Call(ctx, func(ctx context.Context) (dlock.Lease, error) { return sem.acquire(ctx, false, &a) }))
}

func (sem *Semaphore) acquire(ctx context.Context, wait bool, a *lease.Attempt) (dlock.Lease, error) {
	if err := sem.q.check(ctx); err != nil {
		return nil, err
	}
	for {
		h, err := sem.q.acquire(ctx, lease.NewToken(ctx), wait, a)
		if err != nil {
			return asLease(h, err)
		}
		err = sem.curatorLease(ctx, h, wait, a)
		if err == nil && !sem.q.cfg.renew {
			// The grant is now: a lease without renewal lasts its TTL
			// from here, not from its permit node's grant, which came
			// before the wait for Curator's lease.
			if rerr := h.Refresh(ctx); rerr != nil {
				err = dlock.NotObtained(fmt.Errorf("%w: %w", errRequeue, rerr))
			}
		}
		if err == nil && sem.q.cfg.maxHold > 0 {
			// The same for the maximum hold.
			end := time.Now().Add(sem.q.cfg.maxHold)
			h.n.mu.Lock()
			h.n.holdEnd = end
			h.n.mu.Unlock()
			h.CapHold(end)
		}
		if err == nil {
			return h, nil
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tryTimeout(sem.q.cfg.ttl))
		h.Release(rctx)
		cancel()
		if !wait || ctx.Err() != nil || !errors.Is(err, errRequeue) {
			return nil, err
		}
		// The permit node, or Curator's lease node, went (with the
		// session) while Lock waited for Curator's lease: a fault that
		// Lock waits through, as it does in zklock's queue. Queue again.
	}
}

// errRequeue marks a failure of the Curator step that a Lock queues again
// after: the permit node was lost, or the lease node or its path vanished.
var errRequeue = errors.New("zklock: the semaphore's nodes went while it waited for Curator's lease")

// Curator's InterProcessSemaphoreV2 keeps its leases as ephemeral
// sequential nodes "lease-" under path/leases, and takes them one at a
// time under an InterProcessMutex on path/locks: the holder of that mutex
// creates its lease node, waits until path/leases has no more children
// than the semaphore has permits, and releases the mutex.
const (
	curatorLocks  = "locks"
	curatorLeases = "leases"
	curatorLease  = "lease-"
)

// curatorLease takes, for h, a permit node that already holds the
// Semaphore, a lease of Curator's layout on the same path, as Curator
// takes one (see curatorLocks), so that zklock's and Curator's holders
// together never outnumber the permits. Without wait it gives up, with an
// error matching dlock.ErrNotObtained, when the leases are all taken. The
// lease node goes with h (see node.also). Without wait, it waits for the
// ensemble at most TryLock's bound, and then returns an error matching
// dlock.ErrUnavailable.
func (sem *Semaphore) curatorLease(ctx context.Context, h *Lease, wait bool, a *lease.Attempt) error {
	if wait {
		return sem.takeCuratorLease(ctx, h, wait, a)
	}
	begin, parent := time.Now(), ctx
	ctx, cancel := context.WithTimeoutCause(ctx, tryTimeout(sem.q.cfg.ttl), errTryBound)
	defer cancel()
	err := sem.takeCuratorLease(ctx, h, wait, a)
	if err != nil && parent.Err() == nil && ctx.Err() != nil && !errors.Is(err, dlock.ErrUnavailable) {
		// Nobody knows whether a lease is free.
		return fmt.Errorf("zklock: TryLock %s: taking Curator's lease: %w", sem.q.dir,
			sem.q.s.unavailable(outage{since: begin, last: fmt.Errorf("no answer in %v", time.Since(begin).Round(time.Millisecond))}))
	}
	return err
}

func (sem *Semaphore) takeCuratorLease(ctx context.Context, h *Lease, wait bool, a *lease.Attempt) error {
	q, s, n := sem.q, sem.q.s, sem.q.permits
	leases := &queue{s: s, dir: q.dir + "/" + curatorLeases, kind: kindPermit, permits: n, label: curatorLease, cfg: q.cfg}
	for try := 1; !wait; try++ {
		// A look first: a Curator taker that waits holds Curator's mutex
		// for as long as it waits, with its lease node among the leases.
		names, _, err := s.children(ctx, leases.dir)
		switch {
		case err == nil && len(names) >= n:
			return dlock.ErrNotObtained
		case err == nil, errors.Is(err, zk.ErrNoNode):
		case transient(err) || errors.Is(err, zk.ErrSessionExpired):
			if err := pause(ctx, try); err != nil {
				return err
			}
			continue
		default:
			return describe("listing", leases.dir, err)
		}
		break
	}
	gate := &queue{s: s, dir: q.dir + "/" + curatorLocks, kind: kindLock, label: label(kindLock, 0),
		allowed: []kind{kindLock}, cfg: q.cfg, decide: lowestHolds}
	// The mutex is plumbing: its grant and release are no events (gate.ev
	// is nil); a wait for it is the Semaphore's EventWaiting. Without
	// wait, a held mutex refuses TryLock at once, as it does Curator's
	// acquire with no wait: its holder may keep it for as long as it
	// waits for a lease, or is paused.
	g, err := gate.acquire(ctx, lease.NewToken(ctx), wait, a)
	if err != nil {
		return err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tryTimeout(q.cfg.ttl))
		g.Release(rctx)
		cancel()
	}()
	p, err := leases.create(ctx, h.n.token)
	if err != nil {
		return err
	}
	h.n.mu.Lock()
	closing := h.n.closing
	if !closing {
		h.n.also = p.path
	}
	h.n.mu.Unlock()
	if closing {
		s.removeLater(p.path)
		_, err := h.Ended(false)
		return dlock.NotObtained(fmt.Errorf("%w: %w", errRequeue, err))
	}
	for try := 1; ; try++ {
		names, _, watch, err := s.childrenW(ctx, leases.dir)
		switch {
		case ctx.Err() != nil:
			return dlock.NotObtained(ctx.Err())
		case transient(err):
			if err := pause(ctx, try); err != nil {
				return err
			}
			continue
		case errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrSessionExpired):
			return fmt.Errorf("%w: %w", errRequeue, describe("listing", leases.dir, err))
		case err != nil:
			return describe("listing", leases.dir, err)
		case !slices.Contains(names, p.name):
			return fmt.Errorf("zklock: semaphore %s: the lease node %s vanished (its session ended): %w (%w)", q.dir, p.path, dlock.ErrNotObtained, errRequeue)
		case len(names) <= n:
			return nil
		case !wait:
			return dlock.ErrNotObtained
		}
		a.Waiting()
		select {
		case <-ctx.Done():
			return dlock.NotObtained(ctx.Err())
		case <-h.Done():
			_, err := h.Ended(false)
			return dlock.NotObtained(fmt.Errorf("%w: %w", errRequeue, err))
		case <-g.Done():
			// Another taker may hold Curator's mutex now and wait beside
			// this one: the two would wait for each other for ever.
			_, err := g.Ended(false)
			return dlock.NotObtained(fmt.Errorf("%w: Curator's mutex %s: %w", errRequeue, g.Path(), err))
		case <-watch:
		}
	}
}
