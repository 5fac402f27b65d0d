package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/lease"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A Lease is one hold on an etcd lock. It implements dlock.Lease; Lock and
// TryLock return it as one. Its Key is the lock's name; its Fence is the
// create revision of its etcd key.
type Lease struct {
	*lease.State
	g *grant
}

var _ dlock.Lease = (*Lease)(nil)

// EtcdKey returns the etcd key that holds the lock, such as
// "locks/report/694d9ab3c8f1e20b".
func (h *Lease) EtcdKey() string { return h.g.key }

// LeaseID returns the etcd lease the key lives on, which the lease alone
// uses.
func (h *Lease) LeaseID() clientv3.LeaseID { return h.g.id }

// IsOwner returns the comparison that holds in an etcd transaction only
// while this lease's key is still there: put it in the If of a
// transaction on the same cluster to make a write that is refused once the
// lock is lost, as concurrency.Mutex.IsOwner does.
func (h *Lease) IsOwner() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(h.g.key), "=", h.g.rev)
}

// Refresh renews the etcd lease now and checks that the key is still
// there, extending the lease from now: to a full TTL for a fixed lease. It
// returns an error matching dlock.ErrLost (and ErrLeaseNotFound or
// dlock.ErrTakenOver) if the lease had been lost, and dlock.ErrReleased if
// it had been released. A request that gets no answer in time is made
// again, through the next endpoint, until one is answered, ctx is done, or
// the lease's Until has passed, whatever ctx says: a Refresh on a cluster
// that does not answer returns by then an error matching
// dlock.ErrUnavailable (or the lease's own, if it has ended).
func (h *Lease) Refresh(ctx context.Context) error {
	if ended, err := h.Ended(false); ended {
		return err
	}
	g := h.g
	rctx, cancel := context.WithDeadline(ctx, h.Until())
	defer cancel()
	var out outage
	var start, until time.Time
	var err error
	for tries := 1; ; tries++ {
		start = time.Now()
		actx, cancel := g.attempt(rctx)
		until, err = g.check(actx, start)
		late := actx.Err() != nil
		cancel()
		switch {
		case err == nil, errors.Is(err, ErrLeaseNotFound), errors.Is(err, dlock.ErrTakenOver):
		case unconfirmed(err) && tries < 3 && rctx.Err() == nil:
			continue // a renewal just after an election: renew again
		case (late || transient(err)) && ctx.Err() == nil:
			out.failed(start, err)
			if rctx.Err() == nil {
				select {
				case <-rctx.Done():
				case <-time.After(10 * time.Millisecond):
				}
				continue
			}
			err = fmt.Errorf("etcdlock: refreshing %q: %w", h.Key(), g.lk.c.unavailable(out))
		}
		break
	}
	switch {
	case errors.Is(err, ErrLeaseNotFound) || errors.Is(err, dlock.ErrTakenOver):
		h.Lose(dlock.Lost(err))
		_, err := h.Ended(false)
		return err
	case err != nil:
		h.RenewFailed(err)
		if ended, lerr := h.Ended(false); ended {
			return fmt.Errorf("%w (%w)", lerr, err)
		}
		return err
	}
	g.mu.Lock()
	if !g.fixedEnd.IsZero() {
		g.fixedEnd = lease.Validity(start, g.lk.cfg.ttl)
	}
	g.mu.Unlock()
	g.extend(until)
	if ended, err := h.Ended(false); ended {
		return err
	}
	return nil
}

// Release deletes the lease's key, if it is still the lease's, which wakes
// the next waiter, and then revokes the etcd lease. It is idempotent. It
// returns an error matching dlock.ErrNotHeld and dlock.ErrLost if the
// lease had already been lost: its key was gone (deleted, or its etcd lease
// expired). A delete that gets no answer in time (a member that stopped
// answering) is followed by revokes, through the next endpoints, until one
// answers, ctx is done, or the time a TryLock waits for the cluster (the
// TTL, 2s to 5s) has passed, whatever ctx says: a revoke that succeeds
// releases the lease, and so does one that finds the etcd lease gone
// before Until after an earlier revoke got no answer (that revoke reached
// the server). If no request gets through, whether the lock is free is
// unknown: Release returns an error matching dlock.ErrUnavailable, the
// lease ends all the same (Err returns dlock.ErrReleased), and the revoke
// is tried again in the background; at worst the etcd lease expires one
// TTL after its last renewal.
func (h *Lease) Release(ctx context.Context) error {
	if ended, err := h.BeginRelease(); ended {
		return err
	}
	g := h.g
	parent := ctx
	ctx, cancelAll := context.WithTimeout(ctx, tryTimeout(g.lk.cfg.ttl))
	defer cancelAll()
	cli := g.lk.c.cli
	start := time.Now()
	actx, cancel := g.attempt(ctx)
	resp, err := cli.Txn(actx).If(h.IsOwner()).Then(clientv3.OpDelete(g.key)).Commit()
	if err != nil && actx.Err() != nil {
		err = noAnswer(time.Since(start))
	}
	cancel()
	if err == nil && !resp.Succeeded {
		h.End(dlock.Lost(fmt.Errorf("%w: key %s deleted", dlock.ErrTakenOver, g.key)))
		return lease.NotHeld(h.Err())
	}
	if err == nil {
		err = h.Released()
		actx, cancel := g.attempt(ctx)
		_, rerr := cli.Revoke(actx, g.id)
		cancel()
		if rerr != nil && !leaseNotFound(rerr) {
			g.lk.c.revokeLater(g.id)
		}
		return err
	}
	var out outage
	out.failed(start, err)
	for sent := false; ctx.Err() == nil; sent = true {
		rstart := time.Now()
		actx, cancel := g.attempt(ctx)
		_, err = cli.Revoke(actx, g.id)
		if err != nil && actx.Err() != nil {
			err = noAnswer(time.Since(rstart))
		}
		cancel()
		switch {
		case err == nil:
			return h.Released()
		case leaseNotFound(err) && sent && time.Now().Before(h.Until()):
			// An earlier revoke whose answer did not come in time
			// reached the server: before Until, the etcd lease cannot
			// have expired there.
			return h.Released()
		case leaseNotFound(err) && sent:
			h.End(dlock.Lost(dlock.ErrExpired))
			return lease.NotHeld(h.Err())
		case leaseNotFound(err):
			h.End(dlock.Lost(ErrLeaseNotFound))
			return lease.NotHeld(h.Err())
		}
	}
	// No request got through: whether the key is gone is unknown. The
	// holder is done with the lease either way.
	out.failed(start, err)
	if perr := parent.Err(); perr != nil {
		out.last = fmt.Errorf("%w (%w)", out.last, perr)
	}
	released := h.End(dlock.ErrReleased)
	if released {
		// onEnd revokes nothing for a released lease; a lease that
		// reached its Until first was left to onEnd.
		g.lk.c.revokeLater(g.id)
	}
	after := "the etcd lease is revoked in the background; at worst it expires one TTL after its last renewal"
	if !released {
		after = "the etcd lease expires one TTL after its last renewal"
	}
	err = fmt.Errorf("etcdlock: releasing %q: %w (%s)", h.Key(), g.lk.c.unavailable(out), after)
	if !released {
		// It reached its Until while the requests were on their way.
		_, lerr := h.Ended(true)
		return fmt.Errorf("%w (%w)", lerr, err)
	}
	return err
}

// onEnd runs once the lease has ended: it stops the watchdog and, when the
// holder's own deadline ended the lease (a fixed lease's end, WithMaxHold)
// or the server said it is gone, revokes the etcd lease so that the next
// waiter need not wait for it to expire. A renewed lease that reached its
// Until because no renewal got through is left to expire on the server: it
// does so no earlier than Until, so a holder that missed Done (or is still
// finishing its critical section) keeps the margin it has on every other
// backend, rather than the next holder being let in the moment the cluster
// answers again.
func (h *Lease) onEnd() {
	c := h.g.lk.c
	c.reg.Remove(h)
	c.sched.Remove(&h.g.entry)
	err := h.Err()
	switch {
	case errors.Is(err, dlock.ErrReleased):
	case errors.Is(err, dlock.ErrExpired) && h.g.lk.cfg.renew && !h.MaxHoldReached():
	default:
		c.revokeLater(h.g.id)
	}
}
