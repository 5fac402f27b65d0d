package mysqllock

import (
	"context"
	"fmt"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/lease"
	"github.com/dlock-go/dlock/internal/renewal"
)

// A grant is a Mutex's lease: the row holds its token.
type grant struct {
	*lease.State
	m     *Mutex
	entry renewal.Entry
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
	return g
}

// forget stops renewing an ended lease and drops it from the client; a
// lease that reached its maximum hold frees its row in the background.
func (g *grant) forget() {
	g.m.c.renew.Remove(&g.entry)
	g.m.c.leases.Remove(g)
	if g.MaxHoldReached() {
		g.m.c.abandon(g.Key(), g.Token(), 0)
	}
}

// Refresh extends the lease to a full TTL from now, on the database's
// clock.
func (g *grant) Refresh(ctx context.Context) error {
	if ended, err := g.Ended(false); ended {
		return err
	}
	start := time.Now()
	held, err := g.m.c.refresh(ctx, []*grant{g})
	if err != nil {
		err = g.m.c.describe("refreshing", g.Key(), err)
		g.RenewFailed(err)
		return err
	}
	switch {
	case !held[0] && g.Releasing():
		return dlock.ErrReleased // freed by Release while this was on its way
	case !held[0]:
		g.Lose(dlock.Lost(dlock.ErrTakenOver)) // unless Release began meanwhile
	case g.Extend(lease.Validity(start, g.m.cfg.ttl)):
		return nil
	}
	_, err = g.Ended(false)
	return err
}

// Release frees the row if this lease still holds it, and wakes the
// Client's waiters. From the moment it is called, the lease is not
// renewed, and a renewal already on its way cannot end it as lost.
func (g *grant) Release(ctx context.Context) error {
	if ended, err := g.BeginRelease(); ended {
		return err
	}
	g.m.c.renew.Remove(&g.entry)
	freed, err := g.m.c.release(ctx, g.Key(), g.Token())
	if err != nil {
		// The holder is done with it either way: stop renewing, and keep
		// trying to free the row in the background.
		g.End(dlock.ErrReleased)
		if !isServerError(err) {
			g.m.c.abandon(g.Key(), g.Token(), 0)
		}
		return fmt.Errorf("mysqllock: release of %q did not reach the database (retrying in the background; at worst the lease expires within its TTL): %w",
			g.Key(), g.m.c.describe("releasing", g.Key(), err))
	}
	if !freed {
		g.End(dlock.Lost(dlock.ErrTakenOver))
		_, err := g.Ended(true)
		return err
	}
	return g.Released()
}

// lose ends a lease that a renewal or refresh found lost, reporting the
// failed renewal first.
func lose(st interface {
	End(error) bool
	RenewFailed(error)
}, err error) {
	st.RenewFailed(err)
	st.End(err)
}
