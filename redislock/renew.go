package redislock

import (
	"context"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/renewal"
)

// renewBatch refreshes a batch of leases in one pipelined round trip.
func (c *Client) renewBatch(ctx context.Context, batch []*renewal.Entry) []time.Time {
	calls := make([]Call, len(batch))
	results := make([]Result, len(batch))
	deadline := time.Now().Add(time.Minute)
	for i, e := range batch {
		g := e.Value.(*grant)
		calls[i] = Call{Script: g.m.f.refresh, Keys: []string{g.m.keys.lock}, Args: []string{g.Token(), g.m.ttl}}
		if u := g.Until(); u.Before(deadline) {
			deadline = u
		}
	}
	// Waiting past the earliest deadline is pointless: that lease has ended.
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	start := time.Now()
	c.conn.Eval(ctx, calls, results)
	now := time.Now()
	next := make([]time.Time, len(batch))
	for i, e := range batch {
		g := e.Value.(*grant)
		period := g.m.cfg.ttl / 3
		r := results[i]
		switch {
		case r.Err == nil && r.Val == int64(1):
			if g.Extend(validity(start, g.m.cfg.ttl)) {
				next[i] = now.Add(period)
			}
		case r.Err == nil:
			g.End(dlock.Lost(dlock.ErrTakenOver))
		case isReply(r.Err):
			g.End(dlock.Lost(describe(g.Key(), g.m.f.refresh, r.Err)))
		default:
			// Unreachable server: try again soon; the lease ends by itself
			// at Until if no renewal gets through.
			next[i] = now.Add(period / 4)
		}
	}
	return next
}
