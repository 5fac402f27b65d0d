package redlock

import (
	"context"
	"time"

	"github.com/dlock-go/dlock/redislock/transport"

	"github.com/dlock-go/dlock/internal/redisscript"
	"github.com/dlock-go/dlock/internal/renewal"
)

// renewBatch extends a batch of leases: one pipelined round trip per node,
// all nodes in parallel. It returns as soon as every lease's outcome is
// decided, so a paused or slow minority does not hold the batch up.
func (c *Client) renewBatch(ctx context.Context, batch []*renewal.Entry) []time.Time {
	calls := make([]transport.Call, len(batch))
	deadline := time.Now().Add(time.Minute)
	for i, e := range batch {
		g := e.Value.(*grant)
		calls[i] = transport.Call{Script: redisscript.Refresh, Keys: []string{g.m.keys.lock}, Args: []string{g.Token(), g.m.ttl}}
		if u := g.Until(); u.Before(deadline) {
			deadline = u
		}
	}
	// A batch may be thousands of calls, so it is bounded by the earliest
	// lease's deadline rather than by the node timeout of one operation.
	ctx, cancel := context.WithDeadline(ctx, deadline)
	type nodeResults struct {
		node    int
		results []transport.Result
	}
	arrivals := make(chan nodeResults, len(c.nodes))
	start := time.Now()
	for i, n := range c.nodes {
		go func() {
			results := make([]transport.Result, len(calls))
			n.conn.Eval(ctx, calls, results)
			arrivals <- nodeResults{i, results}
		}()
	}
	defer cancel() // the remaining nodes' replies are no longer needed

	tallies := make([]tally, len(batch))
	spare := len(c.nodes) - c.quorum // nodes a lease can do without
	for answered := 0; answered < len(c.nodes); answered++ {
		a := <-arrivals
		for i, r := range a.results {
			t := &tallies[i]
			switch {
			case r.Err != nil:
				t.errs = append(t.errs, &NodeError{Node: c.nodes[a.node].name, Err: r.Err})
			case r.Val == int64(1):
				t.ok++
			default:
				t.notOurs++
			}
		}
		if answered+1 >= c.quorum && allDecided(tallies, c.quorum, spare) {
			break
		}
	}
	now := time.Now()
	next := make([]time.Time, len(batch))
	for i, e := range batch {
		g := e.Value.(*grant)
		period := g.m.cfg.ttl / 3
		switch {
		case g.extended(tallies[i], start):
			next[i] = now.Add(period)
		case g.Err() == nil: // no majority this time: try again soon
			next[i] = now.Add(period / 4)
		}
	}
	return next
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
