package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
)

// A printer writes lines for several goroutines at once.
type printer struct {
	mu sync.Mutex
	w  io.Writer
}

func (p *printer) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, format, args...)
}

// since formats the time from start to t as "+1.20s".
func since(start, t time.Time) string {
	return fmt.Sprintf("+%.2fs", t.Sub(start).Seconds())
}

// ms formats d in milliseconds with one decimal, such as "0.4ms".
func ms(d time.Duration) string {
	return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
}

// A grant is one lease a worker obtained.
type grant struct {
	worker, round int
	lease         dlock.Lease
	at            time.Time
	waited        time.Duration // how long Lock took
	handover      time.Duration // from the previous holder's release to this grant; -1 for the first
}

// A board watches the workers of one lock. It records every grant, and
// checks, in the process, what the lock promises: no two workers hold a
// valid lease at once, and every fence is larger than the one before.
type board struct {
	onGrant func(g grant) // if not nil, called for each grant, in order, under mu

	mu         sync.Mutex
	holder     *grant    // the worker between its grant and its release, if any
	released   time.Time // when the last holder began to release
	grants     []grant
	violations []string
	lost       []error // leases that ended before their release
	releaseErr []error // releases that reported an error but released
	failures   []error // workers that stopped with an error
	changed    chan struct{}
}

func newBoard(onGrant func(grant)) *board {
	return &board{onGrant: onGrant, changed: make(chan struct{})}
}

// granted records that worker obtained lease after waiting waited.
func (b *board) granted(worker, round int, lease dlock.Lease, waited time.Duration) {
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	g := grant{worker: worker, round: round, lease: lease, at: now, waited: waited, handover: -1}
	if !b.released.IsZero() {
		g.handover = now.Sub(b.released)
	}
	if h := b.holder; h != nil {
		select {
		case <-h.lease.Done(): // its holder was told it lost the lease
		default:
			b.violations = append(b.violations, fmt.Sprintf("worker %d was granted fence %d while worker %d still held fence %d",
				worker, lease.Fence(), h.worker, h.lease.Fence()))
		}
	}
	if n := len(b.grants); n > 0 && lease.Fence() <= b.grants[n-1].lease.Fence() {
		b.violations = append(b.violations, fmt.Sprintf("worker %d was granted fence %d after fence %d",
			worker, lease.Fence(), b.grants[n-1].lease.Fence()))
	}
	b.grants = append(b.grants, g)
	b.holder = &g
	if b.onGrant != nil {
		b.onGrant(g)
	}
	close(b.changed)
	b.changed = make(chan struct{})
}

// releasing records that the holder of lease is about to release it.
func (b *board) releasing(lease dlock.Lease) {
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.holder != nil && b.holder.lease == lease {
		b.holder = nil
		b.released = now
	}
}

// waitFor waits until cond, called under the board's lock, holds; it returns
// the workers' failures if any failed by then.
func (b *board) waitFor(ctx context.Context, cond func() bool) error {
	for {
		b.mu.Lock()
		ok, changed, failure := cond(), b.changed, errors.Join(b.failures...)
		b.mu.Unlock()
		if ok {
			return failure // a condition that gave up on a failed worker
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		case <-time.After(5 * time.Millisecond): // conditions on the holder change without a grant
		}
	}
}

// count returns the number of grants so far.
func (b *board) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.grants)
}

// stats summarises the grants from index from on.
type stats struct {
	grants       int
	maxHandover  time.Duration
	medHandover  time.Duration
	firstF, last uint64
}

func (b *board) stats(from int) stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	var s stats
	var hs []time.Duration
	for _, g := range b.grants[min(from, len(b.grants)):] {
		if s.grants == 0 {
			s.firstF = g.lease.Fence()
		}
		s.grants++
		s.last = g.lease.Fence()
		if g.handover >= 0 {
			hs = append(hs, g.handover)
		}
	}
	if len(hs) > 0 {
		slices.Sort(hs)
		s.medHandover, s.maxHandover = hs[len(hs)/2], hs[len(hs)-1]
	}
	return s
}

// A work function holds the lock for one round; it returns early if the
// lease is lost.
type work func(ctx context.Context, worker, round int, lease dlock.Lease)

// holdFor returns a work function that holds the lock for d.
func holdFor(d time.Duration) work {
	return func(ctx context.Context, _, _ int, lease dlock.Lease) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-lease.Done():
		case <-ctx.Done():
		}
	}
}

// releaseTimeout bounds a worker's release, which runs even after the demo
// was interrupted.
const releaseTimeout = 3 * time.Second

// contend runs worker number w: it takes l rounds times (until ctx ends
// if rounds is 0), holding it with hold and recording everything on b. A
// worker that fails records its error on b and stops; one whose ctx ends
// while it waits stops quietly.
func (b *board) contend(ctx context.Context, w int, l dlock.Locker, rounds int, hold work) {
	if err := b.rounds(ctx, w, l, rounds, hold); err != nil {
		b.mu.Lock()
		b.failures = append(b.failures, err)
		b.mu.Unlock()
	}
}

// failed reports whether a worker failed. b.mu must be held.
func (b *board) failed() bool { return len(b.failures) > 0 }

// err returns the workers' errors joined, or nil.
func (b *board) err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return errors.Join(b.failures...)
}

func (b *board) rounds(ctx context.Context, w int, l dlock.Locker, rounds int, hold work) error {
	for round := 1; rounds == 0 || round <= rounds; round++ {
		start := time.Now()
		lease, err := l.Lock(ctx)
		if err != nil {
			if ctx.Err() != nil && errors.Is(err, dlock.ErrNotObtained) {
				return nil
			}
			return fmt.Errorf("worker %d: %w", w, err)
		}
		b.granted(w, round, lease, time.Since(start))
		hold(ctx, w, round, lease)
		b.releasing(lease)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		err = lease.Release(rctx)
		cancel()
		b.mu.Lock()
		switch {
		case err == nil:
		case errors.Is(err, dlock.ErrNotHeld):
			b.lost = append(b.lost, fmt.Errorf("worker %d's lease (fence %d) %s", w, lease.Fence(), lostWhy(lease.Err())))
		case errors.Is(lease.Err(), dlock.ErrReleased):
			b.releaseErr = append(b.releaseErr, err)
		default:
			b.mu.Unlock()
			return fmt.Errorf("worker %d: release: %w", w, err)
		}
		b.mu.Unlock()
	}
	return nil
}

// lostWhy says in words how a lease that Done ended was lost: the demo
// shows what happened, not an error chain.
func lostWhy(err error) string {
	switch {
	case errors.Is(err, dlock.ErrExpired):
		return "expired"
	case errors.Is(err, dlock.ErrTakenOver):
		return "was taken over"
	case errors.Is(err, dlock.ErrMaxHold):
		return "reached its max hold"
	}
	return "was lost"
}
