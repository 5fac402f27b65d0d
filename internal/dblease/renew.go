package dblease

import (
	"context"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/lease"
	"github.com/dlock-go/dlock/internal/renewal"
)

// renewBatch is the watchdog's work: it renews a batch's lease-mode
// leases in one statement, and confirms each session-mode lease on its
// own connection, all at once. It returns when each is to be renewed
// next, or the zero time to stop.
func (c *Client) renewBatch(ctx context.Context, batch []*renewal.Entry) []time.Time {
	next := make([]time.Time, len(batch))
	var grants []*Grant
	var at []int // the index in batch of each of grants
	var wg sync.WaitGroup
	for i, e := range batch {
		switch l := e.Value.(type) {
		case *Grant:
			if !l.Releasing() { // a lease being released is not renewed
				grants, at = append(grants, l), append(at, i)
			}
		case *Session:
			wg.Go(func() { next[i] = l.renew(ctx) })
		}
	}
	if len(grants) > 0 {
		for i, t := range c.renewGrants(ctx, grants) {
			next[at[i]] = t
		}
	}
	wg.Wait()
	return next
}

// renewGrants renews lease-mode leases in one statement.
func (c *Client) renewGrants(ctx context.Context, gs []*Grant) []time.Time {
	deadline := gs[0].Until()
	for _, g := range gs[1:] {
		if u := g.Until(); u.Before(deadline) {
			deadline = u
		}
	}
	// Waiting past the earliest deadline is pointless: that lease has ended.
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	start := time.Now()
	held, err := c.refresh(ctx, gs)
	now := time.Now()
	next := make([]time.Time, len(gs))
	for i, g := range gs {
		period := g.cfg.TTL / 3
		switch {
		case g.Releasing():
			// Released while this renewal was on its way: whatever it
			// found, Release ends the lease.
		case err != nil:
			// Try again soon; the lease ends by itself at Until if no
			// renewal gets through.
			g.RenewFailed(c.Describe("renewing", g.Key(), err))
			next[i] = now.Add(period / 4)
		case !held[i]:
			g.Lose(dlock.Lost(dlock.ErrTakenOver)) // unless Release began meanwhile
		case g.Extend(lease.Validity(start, g.cfg.TTL)):
			next[i] = now.Add(period)
		}
	}
	return next
}
