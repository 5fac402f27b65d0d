package mysqllock

import (
	"context"
	"fmt"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/dblease"
	"github.com/dlock-go/dlock/internal/lease"
)

// A Mutex is an exclusive lock in lease mode: a row of the Client's table,
// named for the lock, that holds the owner token, the fence and an expiry
// on the database's clock. It is not reentrant: a goroutine that holds it
// and asks again through its lease's Context gets ErrNotReentrant, and one
// that asks through an unrelated context waits like anyone else. It is not
// fair: waiters poll, and the first to try after a release wins.
//
// A Mutex holds no state of its own beyond its configuration; it is safe
// for concurrent use, and each Lock returns an independent Lease.
type Mutex struct{ locker }

var _ dlock.Locker = (*Mutex)(nil)

// NewMutex returns the lease-mode mutex called name: any non-empty UTF-8
// text up to MaxNameBytes, compared byte for byte. It never fails: a bad
// name or option is reported by Lock and TryLock.
func (c *Client) NewMutex(name string, opts ...Option) *Mutex {
	m := &Mutex{}
	m.locker = newLocker(c, name, "Mutex", false, opts, m.attempt)
	return m
}

// maxFence is the largest fence handed out: 2^53, below which JSON and
// JavaScript read integers exactly.
const maxFence = 1 << 53

// attempt runs the acquire statements once, with a fresh token, on a
// connection of its own so that a clean-up can tell when what it sent
// can no longer land.
func (m *Mutex) attempt(ctx context.Context, _ time.Duration) (dlock.Lease, time.Duration, error) {
	conn, err := m.c.conn(ctx)
	if err != nil {
		return nil, 0, m.core.Failed(ctx, "connecting to take", err)
	}
	gate, err := m.c.gate(ctx, conn, m.core.Cfg)
	if err != nil {
		conn.end(ctx, err)
		return nil, 0, m.core.Failed(ctx, "acquiring", err)
	}
	name, token := m.core.Name, lease.NewToken(ctx)
	start := time.Now()
	fence, left, err := m.c.take(ctx, conn, name, token, dblease.Units(m.core.Cfg.TTL, time.Microsecond), gate)
	if err == nil || isServerError(err) {
		conn.done(ctx) // the outcome is known: taken, held, or not run
	} else {
		// The statements may have run, or may yet run, without their
		// outcome reaching us: free the row if it holds our token, once
		// the connection that ran them has ended.
		discard(conn.Conn)
		m.c.core.Abandon(name, token, conn.id)
	}
	switch {
	case err != nil:
		return nil, 0, m.core.Failed(ctx, "acquiring", err)
	case fence == 0:
		if wait, err := m.c.abstaining(conn, name, gate); wait > 0 {
			return nil, wait, err
		}
		return nil, left, nil
	}
	return m.core.Granted(ctx, token, fence, start)
}

// fenceOutOfRange is the error of a grant whose fence is past maxFence:
// the database's clock is wrong, or a row's fence was set by hand.
func fenceOutOfRange(name string, fence uint64) error {
	return fmt.Errorf("mysqllock: the fence of %q would be %d, past 2^53; the database's clock or the row's fence is wrong (the lock was not taken)", name, fence)
}
