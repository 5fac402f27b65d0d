package redlock

import (
	"context"
	"fmt"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/lease"
	"github.com/dlock-go/dlock/internal/redisscript"
	"github.com/dlock-go/dlock/internal/renewal"
	"github.com/dlock-go/dlock/redisconn"
)

// A grant is a Redlock lease.
type grant struct {
	*lease.State
	m     *Mutex
	entry renewal.Entry

	// What became of the acquire on each node, and its replies still to
	// come: Release reads them, to know where its key may still land.
	acq        []acqOutcome
	acqReplies <-chan reply
	acqLeft    int

	retakeState // see retake.go
}

var _ dlock.Lease = (*grant)(nil)

// newGrant returns the lease; the caller registers it with the client.
func newGrant(ctx context.Context, m *Mutex, token string, fence uint64, until time.Time) *grant {
	g := &grant{m: m}
	g.State = lease.New(ctx, m.ev, m.name, token, fence, until, g.forget)
	if m.cfg.maxHold > 0 {
		g.CapHold(time.Now().Add(m.cfg.maxHold))
	}
	g.entry.Value = g
	g.Start()
	return g
}

// forget stops extending an ended lease and drops it from the client; a
// lease that reached its maximum hold deletes its key from every node in
// the background.
func (g *grant) forget() {
	g.m.c.renew.Remove(&g.entry)
	g.m.c.leases.Remove(g)
	if g.MaxHoldReached() {
		call := redisscript.ReleaseCall{Lock: g.m.keys.lock, Token: g.Token(), Channel: g.m.keys.channel}.Call(redisscript.Release)
		s := g.m.c.newSweep(call, g.m.cfg.ttl)
		for i := range s.del {
			s.del[i] = true
		}
		s.acq, s.acqLeft, s.acqKnown = g.acqReplies, g.acqLeft, g.acq
		s.before = func() { // the lease has ended: no retake starts after this
			for i, late := range g.mayLandLate() {
				s.late[i] = s.late[i] || late
			}
		}
		g.m.c.start(s)
	}
}

// tally counts the nodes' answers to a compare-and-act script.
type tally struct {
	ok, notOurs int
	errs        []error
	failed      []bool // by node: no answer
	absent      []bool // by node: answered that the key is absent (counted in notOurs); nil if none did
}

// run sends call, a compare-and-act script on the lease's key, to every
// node, and counts their answers.
func (g *grant) run(ctx context.Context, call redisconn.Call) tally {
	c := g.m.c
	replies := c.fanOut(ctx, call)
	t := tally{failed: make([]bool, len(c.nodes))}
	for range c.nodes {
		r := <-replies
		switch {
		case r.res.Err != nil:
			t.errs = append(t.errs, &NodeError{Node: c.nodes[r.node].name, Err: r.res.Err})
			t.failed[r.node] = !redisscript.IsReply(r.res.Err)
		case positive(r.res.Val):
			t.ok++
		default:
			t.notOurs++
			t.markAbsent(r.res.Val, r.node, len(c.nodes))
		}
	}
	return t
}

// markAbsent records node i as one that answered that the key is absent,
// if v (a quorum_refresh reply that is not 1) says so.
func (t *tally) markAbsent(v any, i, n int) {
	if v != int64(-1) {
		return
	}
	if t.absent == nil {
		t.absent = make([]bool, n)
	}
	t.absent[i] = true
}

// extended applies the outcome of an extension sent at start. It reports
// whether the lease was extended, and ends it if a majority can no longer
// be ours. A failure is reported to the observer (EventRenewFailed).
func (g *grant) extended(t tally, start time.Time) bool {
	c := g.m.c
	late := false
	if t.ok >= c.quorum {
		if time.Now().Before(g.Until()) {
			return g.Extend(start.Add(g.m.cfg.ttl - drift(g.m.cfg.ttl)))
		}
		late = true
	}
	if t.notOurs > len(c.nodes)-c.quorum {
		g.Lose(dlock.Lost(dlock.ErrTakenOver)) // unless its holder is releasing it
		return false
	}
	if g.Observed() { // build the error only to report it
		if late {
			g.RenewFailed(fmt.Errorf("redlock: the extension of %q reached a majority after the lease's Until", g.Key()))
		} else {
			g.RenewFailed(errQuorum("extension", g.Key(), t.ok, c.quorum, len(c.nodes), t.errs))
		}
	}
	return false
}

// Refresh extends the lease to a full TTL if a majority extends it before
// the current Until; it then takes the nodes that answered that the key is
// absent (see retake.go).
func (g *grant) Refresh(ctx context.Context) error {
	if ended, err := g.Ended(false); ended {
		return err
	}
	start := time.Now()
	t := g.run(ctx, redisscript.RefreshCall{Lock: g.m.keys.lock, Token: g.Token(), TTL: g.m.ttl}.Call(redisscript.QuorumRefresh))
	if g.extended(t, start) {
		if t.absent != nil {
			g.m.c.retake(ctx, []retakeJob{{g, t.absent}})
		}
		return nil
	}
	if ended, err := g.Ended(false); ended {
		return err
	}
	return errQuorum("refresh", g.Key(), t.ok, g.m.c.quorum, len(g.m.c.nodes), t.errs)
}

// Release deletes the lock on every node. It returns once a majority has
// deleted it, waiting for the nodes at most until the lease's Until (or
// the node timeout, if that is later) or until ctx is done; the other
// nodes are handled in the background, and Close waits for them. It
// returns an error, carrying the NodeErrors, only when no majority
// confirmed the release; nodes that could not be reached, or turned it away
// for now (BUSY, LOADING, ...), are retried in the background, and their
// keys expire within the TTL at worst. When such nodes kept the release
// from a majority (the others being too few to deny one), the error
// matches dlock.ErrUnavailable, unless ctx ended first; if the lease ran
// out meanwhile, it matches dlock.ErrNotHeld as well.
func (g *grant) Release(ctx context.Context) error {
	if ended, err := g.BeginRelease(); ended {
		return err
	}
	c := g.m.c
	n := len(c.nodes)
	// A retake under way has returned once mayLandLate does, and none
	// starts after BeginRelease (see retake.go).
	retook := g.mayLandLate()
late:
	for g.acqLeft > 0 { // the acquire's late replies that have come
		select {
		case r := <-g.acqReplies:
			g.acqLeft--
			g.acq[r.node] = outcomeOf(r)
		default:
			break late
		}
	}
	for i, late := range retook {
		if late { // a retake whose call failed may still set the key, as an acquire may
			g.acq[i] = acqUnknown
		}
	}
	call := redisscript.ReleaseCall{Lock: g.m.keys.lock, Token: g.Token(), Channel: g.m.keys.channel}.Call(redisscript.Release)
	s := c.newSweep(call, g.m.cfg.ttl)
	s.acq, s.acqLeft, s.acqKnown = g.acqReplies, g.acqLeft, g.acq
	// A release waits for a majority until the lease's Until, not one
	// node timeout: the timeout bounds an acquire, whose validity it
	// spends, while a release that comes late is still true, and on a
	// loaded machine a majority may answer later than the node timeout.
	// The nodes left once a majority answered get the node timeout; the
	// clean-up retries those that did not answer in it.
	sent := time.Now()
	replies, calls := c.fanOutFor(ctx, call, nil, max(c.cfg.nodeTimeout, time.Until(g.Until())))
	ok, answered := 0, 0
	notOurs := 0 // nodes that answered that the key is not ours
	failing := 0 // nodes that could not be reached, did not answer, or turned the call away
	var errs []error
	// Until a majority has released it, or a majority has answered that
	// the key is not ours, or the answers left can settle neither: the
	// others are handled in the background.
	for answered < n && ok < c.quorum && notOurs <= n-c.quorum &&
		(ok+n-answered >= c.quorum || notOurs+n-answered > n-c.quorum) {
		r := <-replies
		answered++
		i := r.node
		switch {
		case r.res.Err != nil:
			errs = append(errs, &NodeError{Node: c.nodes[i].name, Err: r.res.Err})
			if redisscript.Transient(r.res.Err) {
				failing++
			}
			if !redisscript.IsReply(r.res.Err) && !redisscript.Unsent(r.res.Err) || redisscript.TurnedAway(r.res.Err) {
				s.del[i], s.late[i] = true, g.acq[i] == acqUnknown
			}
		case positive(r.res.Val):
			ok++
			s.deleted[i] = true
		case g.acq[i] == acqUnknown:
			// Not there, but the acquire that failed on this node may
			// still set it: look again later.
			s.del[i], s.late[i] = true, true
			notOurs++
		default:
			notOurs++
		}
	}
	s.rel, s.relLeft = replies, n-answered
	if answered < n {
		calls.cutAt(sent.Add(c.cfg.nodeTimeout))
	}
	if notOurs > n-c.quorum {
		// A majority does not hold the key (whatever the others said).
		g.End(dlock.Lost(dlock.ErrTakenOver))
		c.start(s)
		_, err := g.Ended(true)
		return err
	}
	released := g.Released() // not nil if the lease expired while the release was in flight
	c.start(s)
	if ok >= c.quorum {
		return released // a majority released it; the rest are handled in the background
	}
	err := errQuorum("release", g.Key(), ok, c.quorum, n, errs)
	// The nodes that answered no (the key is not ours, or an error that
	// waiting cannot heal) may be too few to deny a majority: the nodes
	// that could not be reached or did not answer then stood between the
	// release and one. A call that ctx cut short tells nothing of them.
	down := failing > 0 && answered-ok-failing <= n-c.quorum && cancelled(ctx) == nil
	switch {
	case released != nil && down:
		// The lease ran out while its release waited for a majority: it
		// is not held, as for a Release called after Until.
		return fmt.Errorf("%w (%w)", released, c.unavailable(sent, err))
	case released != nil:
		return fmt.Errorf("%w (%v)", released, err)
	case down:
		return c.unavailable(sent, err)
	}
	return err
}

// positive reports whether a script's integer reply is at least 1: the
// compare-and-act scripts return 0 when the key is not this owner's.
func positive(v any) bool {
	n, ok := v.(int64)
	return ok && n >= 1
}
