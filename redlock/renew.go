package redlock

import (
	"context"
	"sync"
	"time"

	"github.com/dlock-go/dlock/internal/redisscript"
	"github.com/dlock-go/dlock/internal/renewal"
	"github.com/dlock-go/dlock/redislock"
)

// renewBatch extends a batch of leases: one pipelined round trip per node,
// all nodes in parallel.
func (c *Client) renewBatch(ctx context.Context, batch []*renewal.Entry) []time.Time {
	calls := make([]redislock.Call, len(batch))
	deadline := time.Now().Add(time.Minute)
	for i, e := range batch {
		g := e.Value.(*grant)
		calls[i] = redislock.Call{Script: redisscript.Refresh, Keys: []string{g.m.keys.lock}, Args: []string{g.Token(), g.m.ttl}}
		if u := g.Until(); u.Before(deadline) {
			deadline = u
		}
	}
	// A batch may be thousands of calls, so it is bounded by the earliest
	// lease's deadline rather than by the node timeout of one operation.
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	start := time.Now()
	tallies := make([]tally, len(batch))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		wg.Go(func() {
			results := make([]redislock.Result, len(calls))
			n.conn.Eval(ctx, calls, results)
			mu.Lock()
			defer mu.Unlock()
			for i, r := range results {
				switch {
				case r.Err != nil:
					tallies[i].errs = append(tallies[i].errs, &NodeError{Node: n.name, Err: r.Err})
				case r.Val == int64(1):
					tallies[i].ok++
				default:
					tallies[i].notOurs++
				}
			}
		})
	}
	wg.Wait()
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
