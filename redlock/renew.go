package redlock

import (
	"context"
	"time"

	"github.com/dlock-go/dlock/internal/redisscript"
	"github.com/dlock-go/dlock/internal/renewal"
	"github.com/dlock-go/dlock/redisconn"
)

// renewBatch extends a batch of leases: one pipelined round trip per node,
// all nodes in parallel. It returns as soon as every lease's outcome is
// decided, so a paused or slow minority does not hold the batch up. The
// leases a majority extended are then retaken, in the background, on the
// nodes that answered that their key is absent (see retake.go).
func (c *Client) renewBatch(ctx context.Context, batch []*renewal.Entry) []time.Time {
	calls := make([]redisconn.Call, len(batch))
	deadline := time.Now().Add(time.Minute)
	for i, e := range batch {
		g := e.Value.(*grant)
		calls[i] = redisscript.RefreshCall{Lock: g.m.keys.lock, Token: g.Token(), TTL: g.m.ttl}.Call(redisscript.QuorumRefresh)
		if u := g.Until(); u.Before(deadline) {
			deadline = u
		}
	}
	// A batch may be thousands of calls, so it is bounded by the earliest
	// lease's deadline rather than by the node timeout of one operation.
	ctx, cancel := context.WithDeadline(ctx, deadline)
	arrivals := make(chan nodeResults, len(c.nodes))
	start := time.Now()
	for i, n := range c.nodes {
		go func() {
			results := make([]redisconn.Result, len(calls))
			n.conn.Eval(ctx, calls, results)
			arrivals <- nodeResults{i, results}
		}()
	}

	tallies := make([]tally, len(batch))
	spare := len(c.nodes) - c.quorum // nodes a lease can do without
	answered := 0
	for answered < len(c.nodes) {
		var a nodeResults
		select {
		case a = <-arrivals:
		case <-ctx.Done(): // the earliest lease's Until, or Close: a Conn may not end its call by itself
		}
		if a.results == nil {
			break
		}
		answered++
		for i, r := range a.results {
			t := &tallies[i]
			switch {
			case r.Err != nil:
				t.errs = append(t.errs, &NodeError{Node: c.nodes[a.node].name, Err: r.Err})
			case r.Val == int64(1):
				t.ok++
			default:
				t.notOurs++
				t.markAbsent(r.Val, a.node, len(c.nodes))
			}
		}
		if answered >= c.quorum && allDecided(tallies, c.quorum, spare) {
			break
		}
	}
	now := time.Now()
	next := make([]time.Time, len(batch))
	var extended []int // into batch
	absent := false    // some lease in extended has a node without its key
	for i, e := range batch {
		g := e.Value.(*grant)
		period := g.m.cfg.ttl / 3
		switch {
		case g.extended(tallies[i], start):
			next[i] = now.Add(period)
			extended = append(extended, i)
			absent = absent || tallies[i].absent != nil
		case g.Err() == nil: // no majority this time: try again soon
			next[i] = now.Add(period / 4)
		}
	}
	left := len(c.nodes) - answered
	if len(extended) == 0 || !absent && left == 0 || !c.background.Go(func(bctx context.Context) {
		c.retakeAbsent(bctx, batch, tallies, extended, arrivals, left, cancel)
	}) {
		cancel() // the remaining nodes' replies are no longer needed
	}
	return next
}

// nodeResults are one node's replies to a batch.
type nodeResults struct {
	node    int
	results []redisconn.Result
}

// retakeAbsent retakes the leases of a batch that a majority extended,
// extended, on the nodes that answered that their key is absent. It first
// waits, at most the node timeout, for the left nodes that had not
// answered when the batch was decided (the batch does not wait for them),
// then calls cancel, which ends their calls.
func (c *Client) retakeAbsent(ctx context.Context, batch []*renewal.Entry, tallies []tally, extended []int,
	arrivals <-chan nodeResults, left int, cancel context.CancelFunc) {
	if left > 0 {
		wait := time.NewTimer(c.cfg.nodeTimeout)
	late:
		for ; left > 0; left-- {
			select {
			case a := <-arrivals:
				for _, i := range extended {
					if r := a.results[i]; r.Err == nil {
						tallies[i].markAbsent(r.Val, a.node, len(c.nodes))
					}
				}
			case <-wait.C:
				break late
			case <-ctx.Done():
				break late
			}
		}
		wait.Stop()
	}
	cancel()
	var jobs []retakeJob
	for _, i := range extended {
		if t := tallies[i]; t.absent != nil {
			jobs = append(jobs, retakeJob{batch[i].Value.(*grant), t.absent})
		}
	}
	if len(jobs) > 0 {
		c.retake(ctx, jobs)
	}
}

// allDecided reports whether every tally has reached a majority of
// extensions, or has lost more nodes than a majority can spare.
func allDecided(ts []tally, quorum, spare int) bool {
	for _, t := range ts {
		if t.ok < quorum && t.notOurs+len(t.errs) <= spare {
			return false
		}
	}
	return true
}
