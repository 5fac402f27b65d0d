package redislock

import (
	"context"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/lease"
	"github.com/dlock-go/dlock/internal/redisscript"
	"github.com/dlock-go/dlock/internal/renewal"
	"github.com/dlock-go/dlock/redisconn"
)

// A grant is a Mutex's lease.
type grant struct {
	*lease.State
	m     *Mutex
	hold  string // this hold's id: the token, but for a reentrant lock's holds
	entry renewal.Entry
}

var _ dlock.Lease = (*grant)(nil)

// newGrant returns the lease; the caller registers it with the client.
func newGrant(ctx context.Context, m *Mutex, token, hold string, fence uint64, until time.Time) *grant {
	g := &grant{m: m, hold: hold}
	g.State = lease.New(ctx, m.ev, m.name, token, fence, until, g.forget)
	if m.cfg.maxHold > 0 {
		g.CapHold(time.Now().Add(m.cfg.maxHold))
	}
	g.entry.Value = g
	g.Start()
	return g
}

// forget stops renewing an ended lease and drops it from the client; a
// lease that reached its maximum hold gives the lock back.
func (g *grant) forget() {
	g.m.c.renew.Remove(&g.entry)
	g.m.c.leases.Remove(g)
	if g.MaxHoldReached() {
		g.m.c.abandon(g.m.releaseCall(g.Token(), g.hold))
	}
}

// Refresh extends the lease to a full TTL from now.
func (g *grant) Refresh(ctx context.Context) error { return g.m.c.refresh(ctx, g, g.m.cfg.ttl) }

// Release deletes the lock if this lease still holds it and wakes waiters.
func (g *grant) Release(ctx context.Context) error {
	if ended, err := g.BeginRelease(); ended {
		return err
	}
	call := g.m.releaseCall(g.Token(), g.hold)
	start := time.Now()
	v, err := g.m.c.eval(ctx, call)
	if err != nil {
		// The holder is done with it either way: stop renewing, and keep
		// trying to release in the background (a hold is given up once,
		// however often its release runs).
		g.End(dlock.ErrReleased)
		if unfinished(err) {
			g.m.c.abandon(call)
		}
		return g.m.c.releaseFailed(start, g.Key(), call.Script, err)
	}
	n, _ := v.(int64)
	if n < 1 {
		g.End(dlock.Lost(dlock.ErrTakenOver))
		_, err := g.Ended(true)
		return err
	}
	if n > 1 { // waiters were woken: let one of them go first
		g.m.yieldUntil.Store(time.Now().Add(releaseYield).UnixNano())
	}
	return g.Released()
}

func (g *grant) refreshCall() redisconn.Call {
	if p := g.m.permit; p != nil { // a Semaphore's permit
		return redisscript.SemaphoreRefreshCall{Permits: g.m.keys.lock, Limit: p.limit, Main: p.main, Token: g.Token(), TTL: g.m.ttl}.Call()
	}
	return redisscript.RefreshCall{Lock: g.m.keys.lock, Token: g.Token(), TTL: g.m.ttl}.Call(g.m.f.refresh)
}

func (g *grant) renewed(r redisconn.Result, start, now time.Time) time.Time {
	return renewOutcome(g, r, g.m.f.refresh, lease.Validity(start, g.m.cfg.ttl), now, g.m.cfg.ttl/3)
}
