package dblease

import (
	"context"
	"fmt"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/lease"
	"github.com/dlock-go/dlock/internal/renewal"
)

// A Grant is a lease-mode lease: the lock's row holds its token.
type Grant struct {
	*lease.State
	c     *Client
	cfg   Config
	entry renewal.Entry
}

var _ dlock.Lease = (*Grant)(nil)

// NewGrant returns the lease of lock name, held by token with fence until
// until, under options cfg; Keep registers it with the Client.
func NewGrant(ctx context.Context, c *Client, ev *lease.Events, name, token string, fence uint64, until time.Time, cfg Config) *Grant {
	g := &Grant{c: c, cfg: cfg}
	g.State = lease.New(ctx, ev, name, token, fence, until, g.forget)
	if cfg.MaxHold > 0 {
		g.CapHold(time.Now().Add(cfg.MaxHold))
	}
	g.entry.Value = g
	g.Start()
	return g
}

// Granted hands out the lease-mode lease that the statements sent at
// start granted to token, with fence: made and registered with the
// Client, and checked fresh (see lease.Fresh). If the fence is past the
// Dialect's MaxFence, ctx is done, or the grant came too late to be a
// lease, it frees the row instead, and returns the error of the attempt.
func (l *Locker) Granted(ctx context.Context, token string, fence uint64, start time.Time) (dlock.Lease, time.Duration, error) {
	if fence > l.c.MaxFence {
		l.c.Free(ctx, l.Name, token)
		return nil, 0, l.c.FenceOutOfRange(l.Name, fence)
	}
	if cause := Cancelled(ctx, nil); cause != nil {
		// Do not hand a lock to a caller that has stopped waiting for it.
		l.c.Free(ctx, l.Name, token)
		return nil, 0, dlock.NotObtained(cause)
	}
	until := lease.Validity(start, l.Cfg.TTL)
	if !time.Now().Before(until) {
		l.c.Free(ctx, l.Name, token)
		return nil, time.Millisecond, l.tooSlow(start)
	}
	g := NewGrant(ctx, l.c, l.Events, l.Name, token, fence, until, l.Cfg)
	if err := g.Keep(ctx); err != nil {
		return nil, 0, err
	}
	if err := lease.Fresh(ctx, g, l.Cfg.TTL); err != nil {
		return nil, time.Millisecond, err
	}
	return g, 0, nil
}

// TTL returns the lease's TTL.
func (g *Grant) TTL() time.Duration { return g.cfg.TTL }

// Keep registers g, just granted, with the Client and, unless renewal is
// off, with the watchdog. If the Client is closed, it frees the row, ends
// g and returns an error matching both ErrClosed and dlock.ErrNotObtained:
// the grant came as Close began.
func (g *Grant) Keep(ctx context.Context) error {
	if !g.c.Grants.Add(g) {
		g.c.Free(ctx, g.Key(), g.Token())
		g.End(dlock.Lost(g.c.ErrClosed))
		return dlock.NotObtained(g.c.ErrClosed)
	}
	if g.cfg.Renew {
		g.c.Renew.Add(&g.entry, g.cfg.TTL/3)
	}
	if g.Err() != nil { // ended already: make sure it is forgotten
		g.forget()
	}
	return nil
}

// forget stops renewing an ended lease and drops it from the client; a
// lease that reached its maximum hold frees its row in the background.
func (g *Grant) forget() {
	g.c.Renew.Remove(&g.entry)
	g.c.Grants.Remove(g)
	if g.MaxHoldReached() {
		g.c.Abandon(g.Key(), g.Token(), 0)
	}
}

// Refresh extends the lease to a full TTL from now, on the database's
// clock.
func (g *Grant) Refresh(ctx context.Context) error {
	if ended, err := g.Ended(false); ended {
		return err
	}
	start := time.Now()
	held, err := g.c.refresh(ctx, []*Grant{g})
	if err != nil {
		err = g.c.Describe("refreshing", g.Key(), err)
		g.RenewFailed(err)
		return err
	}
	switch {
	case !held[0] && g.Releasing():
		return dlock.ErrReleased // freed by Release while this was on its way
	case !held[0]:
		g.Lose(dlock.Lost(dlock.ErrTakenOver)) // unless Release began meanwhile
	case g.Extend(lease.Validity(start, g.cfg.TTL)):
		return nil
	}
	_, err = g.Ended(false)
	return err
}

// Release frees the row if this lease still holds it, and wakes waiters.
// From the moment it is called, the lease is not renewed, and a renewal
// already on its way cannot end it as lost. It waits for the database at
// most the lease's attempt timeout (see AttemptTimeout), whatever ctx
// says: past it, the lease ends all the same and the row is freed in the
// background. Its error matches dlock.ErrUnavailable if the database
// could not be reached or did not answer (see Client.Unreached).
func (g *Grant) Release(ctx context.Context) error {
	if ended, err := g.BeginRelease(); ended {
		return err
	}
	g.c.Renew.Remove(&g.entry)
	start, caller := time.Now(), ctx
	ctx, cancel := context.WithTimeout(ctx, AttemptTimeout(g.cfg.TTL))
	defer cancel()
	freed, err := g.c.release(ctx, g.Key(), g.Token())
	if err != nil {
		// The holder is done with it either way: stop renewing, and keep
		// trying to free the row in the background.
		g.End(dlock.ErrReleased)
		if g.c.notRun(err) { // a terminated session ran nothing
			g.c.Abandon(g.Key(), g.Token(), 0)
		}
		return g.c.Unreached(caller, start, fmt.Errorf("%s: release of %q did not reach the database (retrying in the background; at worst the lease expires within its TTL): %w",
			g.c.Pkg, g.Key(), g.c.Describe("releasing", g.Key(), err)), err)
	}
	if !freed {
		g.End(dlock.Lost(dlock.ErrTakenOver))
		_, err := g.Ended(true)
		return err
	}
	return g.Released()
}
