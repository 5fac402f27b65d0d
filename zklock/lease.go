package zklock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/lease"
	"github.com/dlock-go/dlock/internal/renewal"
	"github.com/go-zookeeper/zk"
)

// A node is a held lock node: the server-side state of one grant, shared
// by the holds of a reentrant owner.
type node struct {
	q       *queue
	path    string // the node's full path
	token   string // its data: the owner token
	fence   uint64
	session int64 // the session that created it
	entry   renewal.Entry
	// also is a node that goes with this one: a Semaphore's lease node of
	// Curator's layout (see Semaphore), or "".
	also string

	mu       sync.Mutex
	holds    map[*Lease]struct{}
	read     bool      // an RWMutex node that counts as a reader: a reader's, or a downgraded writer's
	deadline time.Time // a fixed lease's end; unused when renewed
	holdEnd  time.Time // WithMaxHold's cap on every hold; zero for none
	closing  bool      // released, lost or expired: takes no new holds
	// releasing: the last hold's Release is deleting the node. Its answer
	// decides how the hold ends; a confirmation or session event in flight
	// meanwhile (which may find the node gone) does not.
	releasing bool
}

// A Lease is one hold on a ZooKeeper lock. It implements dlock.Lease;
// Lock and TryLock return it as one. Its Key is the lock's path.
type Lease struct {
	*lease.State
	n *node
}

var _ dlock.Lease = (*Lease)(nil)

// Path returns the path of the ephemeral node that holds the lock.
func (h *Lease) Path() string { return h.n.path }

// Suspended reports whether the lease's session has lost its connection:
// ownership is uncertain until the client reconnects or Until passes.
func (h *Lease) Suspended() bool { return h.Err() == nil && h.n.q.s.Suspended() }

// span returns how long a confirmation is good for: the lease time, and
// never more than a third of the session timeout (see the package
// documentation).
func (q *queue) span() time.Duration { return min(q.cfg.ttl, q.s.Timeout()/3) }

func (n *node) span() time.Duration { return n.q.span() }

// period returns how often the watchdog confirms the node.
func (n *node) period() time.Duration { return max(n.span()/3, time.Millisecond) }

// newNode returns the node of a grant confirmed by a request sent at
// start, with its first hold.
func newNode(ctx context.Context, q *queue, p pending, token string, fence uint64, start time.Time) (*node, *Lease) {
	n := &node{q: q, path: p.path, token: token, fence: fence, session: p.session,
		holds: make(map[*Lease]struct{}), read: q.kind == kindRead}
	n.entry.Value = n
	n.deadline = lease.Validity(start, q.cfg.ttl)
	if q.cfg.maxHold > 0 {
		n.holdEnd = time.Now().Add(q.cfg.maxHold)
	}
	until := lease.Validity(start, n.span())
	n.mu.Lock()
	h := n.addHoldLocked(ctx, until, q.ev)
	n.mu.Unlock()
	return n, h
}

// addHoldLocked adds a hold that lasts until until and reports its events
// to ev. n.mu must be held.
func (n *node) addHoldLocked(ctx context.Context, until time.Time, ev *lease.Events) *Lease {
	h := &Lease{n: n}
	h.State = lease.New(ctx, ev, n.q.dir, n.token, n.fence, until, h.ended)
	if !n.holdEnd.IsZero() {
		h.CapHold(n.holdEnd)
	}
	n.holds[h] = struct{}{}
	h.Start()
	return h
}

// reenter returns a new hold of n, or nil if n is on its way out.
func (n *node) reenter(ctx context.Context) *Lease {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closing || len(n.holds) == 0 {
		return nil
	}
	var until time.Time
	for h := range n.holds {
		until = h.Until()
		break
	}
	return n.addHoldLocked(ctx, until, n.q.ev)
}

// ended runs when hold h ends, for whatever reason. When the last hold of
// a node ends on its own (Until passed without a confirmation), the node
// may still exist: it is deleted in the background, so that the next
// waiter is not held up until the session ends.
func (h *Lease) ended() {
	n := h.n
	s := n.q.s
	s.leases.Remove(h)
	n.mu.Lock()
	delete(n.holds, h)
	last := len(n.holds) == 0
	expired := last && !n.closing
	n.closing = n.closing || last
	n.mu.Unlock()
	if last {
		s.forget(n)
	}
	if expired {
		s.removeLater(n.path)
	}
	if last {
		if also := n.takeAlso(); also != "" {
			s.removeLater(also)
		}
	}
}

// takeAlso returns n.also, which the caller deletes, and clears it. When
// n's last hold ends (released, lost or expired) n.also is deleted: by
// Release before n itself, else in the background (with a lost session,
// the ensemble deletes it anyway, and the delete only makes it go sooner).
func (n *node) takeAlso() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	also := n.also
	n.also = ""
	return also
}

// lose ends every hold of n with dlock.ErrLost wrapping cause: the node is
// gone.
func (n *node) lose(cause error) { n.end(cause, false) }

// end is lose; confirming says that a confirmation found the node gone,
// which each hold reports as a failed renewal before it ends.
func (n *node) end(cause error, confirming bool) {
	n.mu.Lock()
	if n.releasing {
		n.mu.Unlock()
		return
	}
	n.closing = true
	holds := n.holdsLocked()
	n.mu.Unlock()
	err := dlock.Lost(cause)
	for _, h := range holds {
		if confirming {
			h.RenewFailed(err)
		}
		h.End(err)
	}
}

// holdsLocked returns n's holds. n.mu must be held.
func (n *node) holdsLocked() []*Lease {
	holds := make([]*Lease, 0, len(n.holds))
	for h := range n.holds {
		holds = append(holds, h)
	}
	return holds
}

// confirmFailed reports a confirmation that did not get through (err) to
// the observer of every hold of n; the holds stand until their Until.
func (n *node) confirmFailed(err error) {
	if n.q.ev == nil || errors.Is(err, zk.ErrClosing) {
		return
	}
	err = describe("confirming", n.path, err)
	n.mu.Lock()
	if n.releasing {
		n.mu.Unlock()
		return
	}
	holds := n.holdsLocked()
	n.mu.Unlock()
	for _, h := range holds {
		h.RenewFailed(err)
	}
}

// confirmed extends every hold of n after a request sent at start found
// the node still the session's. A renewal, or a Refresh (refresh), also
// moves a fixed lease's end.
func (n *node) confirmed(start time.Time, refresh bool) {
	until := lease.Validity(start, n.span())
	n.mu.Lock()
	if !n.q.cfg.renew {
		if refresh {
			n.deadline = lease.Validity(start, n.q.cfg.ttl)
		}
		if n.deadline.Before(until) {
			until = n.deadline
		}
	}
	holds := n.holdsLocked()
	n.mu.Unlock()
	for _, h := range holds {
		h.Extend(until)
	}
}

// check applies the answer to an Exists of n sent at start: confirm it,
// or end it if the node is gone or no longer this session's. It reports
// whether n is still held; err is the transport error, if any, which is
// reported to the observer as a failed renewal.
func (n *node) check(start time.Time, exists bool, st *zk.Stat, err error, refresh bool) (bool, error) {
	switch {
	case err == nil && exists && st.EphemeralOwner == n.session:
		n.confirmed(start, refresh)
		return true, nil
	case err == nil:
		n.end(dlock.ErrTakenOver, true)
	case errors.Is(err, zk.ErrSessionExpired):
		n.end(ErrSessionExpired, true)
	default:
		n.confirmFailed(err)
		return true, err
	}
	return false, nil
}

// exists looks for n and, if n is found, for n.also, the node that goes
// with it: n counts as there only if both are, of one session, so that a
// Semaphore lease whose Curator lease node was deleted is confirmed no
// more (a Curator taker may hold the permit that node stood for).
func (n *node) exists(ctx context.Context) (bool, *zk.Stat, error) {
	s := n.q.s
	ok, st, err := s.exists(ctx, n.path)
	n.mu.Lock()
	also := n.also
	n.mu.Unlock()
	if err != nil || !ok || also == "" {
		return ok, st, err
	}
	aok, ast, err := s.exists(ctx, also)
	switch {
	case err != nil:
		return false, nil, err
	case !aok || ast.EphemeralOwner != st.EphemeralOwner:
		// n itself is still there, and would keep its place in the
		// queue for as long as the session lasts.
		s.removeLater(n.path)
		return false, nil, nil
	}
	return true, st, nil
}

// renewBatch confirms a batch of nodes: one Exists each, all in flight at
// once on the session's connection.
func (s *Client) renewBatch(ctx context.Context, batch []*renewal.Entry) []time.Time {
	var deadline time.Time
	for _, e := range batch {
		n := e.Value.(*node)
		n.mu.Lock()
		for h := range n.holds {
			if u := h.Until(); u.After(deadline) {
				deadline = u
			}
			break
		}
		n.mu.Unlock()
	}
	// Waiting past the latest Until is pointless: every lease has ended.
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	start := time.Now()
	// A sync first: a server cut off from the leader still answers reads
	// (until its syncLimit runs out) from a state in which the session may
	// since have expired; it cannot answer a sync.
	synced := s.sync(ctx, "/")
	type answer struct {
		exists bool
		st     *zk.Stat
		err    error
	}
	answers := make([]answer, len(batch))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64) // requests in flight
	for i, e := range batch {
		n := e.Value.(*node)
		if synced != nil {
			answers[i].err = synced
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			a := &answers[i]
			a.exists, a.st, a.err = n.exists(ctx)
		})
	}
	wg.Wait()
	now := time.Now()
	next := make([]time.Time, len(batch))
	for i, e := range batch {
		n := e.Value.(*node)
		a := answers[i]
		held, err := n.check(start, a.exists, a.st, a.err, n.q.cfg.renew)
		switch {
		case !held || errors.Is(err, zk.ErrClosing):
		case err != nil:
			// Unreachable: try again soon; the lease ends by itself at
			// Until if no confirmation gets through.
			next[i] = now.Add(n.period() / 4)
		default:
			// The next confirmation is due a period after this one was
			// sent, whose start its Until counts from, not after its
			// answer: counted from the answer, a slow round trip
			// (a loaded machine, a busy server) was paid twice out of the
			// span's two periods of margin, and a lease whose round trips
			// took 300ms each lapsed with a 900ms span.
			next[i] = start.Add(n.period())
		}
	}
	return next
}

// Refresh confirms that the lock node is still the session's and extends
// the lease from now: to a full TTL for a fixed lease. It returns an
// error matching dlock.ErrLost if the lease had been lost, and
// dlock.ErrReleased if it had been released. It waits for the ensemble no
// later than the lease's Until, whatever ctx says: a Refresh on an
// ensemble that does not answer returns by then an error matching
// dlock.ErrUnavailable (or the lease's own, if it has ended).
func (h *Lease) Refresh(ctx context.Context) error {
	if ended, err := h.Ended(false); ended {
		return err
	}
	n := h.n
	s := n.q.s
	rctx, cancel := context.WithDeadline(ctx, h.Until())
	defer cancel()
	start := time.Now()
	var exists bool
	var st *zk.Stat
	err := s.sync(rctx, n.q.dir) // see renewBatch
	if err == nil {
		exists, st, err = n.exists(rctx)
	}
	if rctx.Err() != nil && ctx.Err() == nil || transient(err) {
		// No answer by Until, or a failed connection.
		if err == nil || rctx.Err() != nil {
			err = fmt.Errorf("no answer by the lease's Until (%v)", time.Since(start).Round(time.Millisecond))
		}
		err = s.unavailable(outage{since: start, last: err})
	}
	held, err := n.check(start, exists, st, err, true)
	switch {
	case !held:
		_, err := h.Ended(false)
		return err
	case err != nil:
		err = describe("refreshing", n.path, err)
		if ended, lerr := h.Ended(false); ended {
			return fmt.Errorf("%w (%w)", lerr, err)
		}
		return err
	}
	if _, err := h.Ended(false); err != nil {
		return err
	}
	return nil
}

// Release gives up this hold; the last hold of a node deletes it, which
// wakes the next waiter. It is idempotent. It returns an error matching
// dlock.ErrNotHeld and dlock.ErrLost if the lease had already been lost.
// The delete's answer decides how the lease ends: a confirmation or a
// session event that comes in meanwhile (and may find the node already
// deleted) does not end it as lost. Release waits for the ensemble as
// long as a TryLock does at most (the TTL, 2s to 5s), whatever ctx says.
// When the delete gets no answer by then, or the connection fails under
// it, whether the lock is free is unknown: Release returns an error
// matching dlock.ErrUnavailable, the lease ends all the same (Err returns
// dlock.ErrReleased), and the node is deleted in the background, or goes
// with the session.
func (h *Lease) Release(ctx context.Context) error {
	if ended, err := h.Ended(true); ended {
		return err
	}
	n := h.n
	n.mu.Lock()
	_, live := n.holds[h]
	last := live && len(n.holds) == 1
	if last {
		n.closing, n.releasing = true, true
	}
	n.mu.Unlock()
	if !last {
		h.End(dlock.ErrReleased) // another hold keeps the node, or the node is already going
		_, err := h.Ended(true)
		return err
	}
	start := time.Now()
	dctx, cancel := context.WithTimeout(ctx, tryTimeout(n.q.cfg.ttl))
	if also := n.takeAlso(); also != "" {
		if err := n.q.s.delete(dctx, also); err != nil && !errors.Is(err, zk.ErrNoNode) {
			n.q.s.removeLater(also)
		} else {
			// Curator's leases directory goes with its last lease, not a
			// reaper's period later (a second in tests, a minute by
			// default): ZooKeeper refuses while another lease is in it,
			// and a taker that finds it gone makes it again.
			dir := also[:strings.LastIndexByte(also, '/')]
			call(dctx, n.q.s, func(c *zk.Conn) (struct{}, error) { return struct{}{}, c.Delete(dir, -1) })
		}
	}
	err := n.q.s.delete(dctx, n.path)
	cut := dctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
	cancel()
	switch {
	case err == nil:
		if h.End(dlock.ErrReleased) {
			return nil
		}
		// It reached its Until while the delete was on its way.
	case errors.Is(err, zk.ErrNoNode):
		h.End(dlock.Lost(dlock.ErrTakenOver))
	case errors.Is(err, zk.ErrSessionExpired):
		h.End(dlock.Lost(ErrSessionExpired))
	case cut || transient(err):
		// No answer, or a failed connection: whether the node is gone is
		// unknown. The holder is done with it either way: stop
		// confirming, and keep trying to delete the node in the
		// background.
		released := h.End(dlock.ErrReleased)
		n.q.s.removeLater(n.path)
		if cut {
			err = fmt.Errorf("no answer in %v", time.Since(start).Round(time.Millisecond))
			if ctx.Err() != nil {
				err = fmt.Errorf("%w (%w)", err, ctx.Err())
			}
		}
		err = fmt.Errorf("zklock: release of %s did not reach the ensemble (the node is deleted in the background, or at worst with the session): %w",
			n.path, n.q.s.unavailable(outage{since: start, last: err}))
		if !released {
			// It reached its Until while the delete was on its way.
			_, lerr := h.Ended(true)
			return fmt.Errorf("%w (%w)", lerr, err)
		}
		return err
	default:
		// An answer that refused the delete, or a closed Client: the
		// holder is done with it either way. Stop confirming, and keep
		// trying to delete the node in the background.
		h.End(dlock.ErrReleased)
		n.q.s.removeLater(n.path)
		return fmt.Errorf("zklock: release of %s did not complete (the node is deleted in the background, or at worst with the session): %w",
			n.path, describe("deleting", n.path, err))
	}
	_, err = h.Ended(true)
	return err
}
