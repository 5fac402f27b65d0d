package pglock

import (
	"context"
	"errors"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/dblease"
	"github.com/dlock-go/dlock/internal/lease"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// A Mutex is an exclusive lock in lease mode: a row of the Client's table,
// named for the lock, that holds the owner token, the fence and an expiry
// on the database's clock. It is not reentrant: a goroutine that holds it
// and asks again through its lease's Context gets ErrNotReentrant, and one
// that asks through an unrelated context waits like anyone else. It is not
// fair: waiters are woken together and the fastest wins.
//
// A Mutex holds no state of its own beyond its configuration; it is safe
// for concurrent use, and each Lock returns an independent Lease. Its Lock
// also wakes when the holder's lease runs out, which a failed attempt
// reports.
type Mutex struct{ locker }

var _ dlock.Locker = (*Mutex)(nil)

// NewMutex returns the lease-mode mutex called name: any non-empty UTF-8
// text without NUL bytes, up to MaxNameBytes. It never fails: a bad name
// or option is reported by Lock and TryLock.
func (c *Client) NewMutex(name string, opts ...Option) *Mutex {
	m := &Mutex{}
	m.locker = newLocker(c, name, "Mutex", false, opts, m.attempt)
	return m
}

// attempt runs the acquire statements once, with a fresh token.
func (m *Mutex) attempt(ctx context.Context, _ time.Duration) (dlock.Lease, time.Duration, error) {
	pc, err := m.c.pool.Acquire(ctx)
	if err != nil {
		return nil, 0, m.core.Failed(ctx, "connecting to take", err)
	}
	name, cfg := m.core.Name, m.core.Cfg
	token := lease.NewToken(ctx)
	start := time.Now()
	var fence, left, wait int64
	identity, restart := cfg.Windows(m.c.core.Cfg.Restart, time.Millisecond)
	err = m.c.take(ctx, pc, name, m.c.sql.acquire, []any{&fence, &left, &wait},
		name, token, dblease.Units(cfg.TTL, time.Millisecond), m.c.obj.sequence, identity, restart)
	switch {
	case err == nil || isServerError(err) || pgconn.SafeToRetry(err):
		// The outcome is known: taken, held, or not run.
		pc.Release()
	default:
		// The statements may have run, or may yet run, without their
		// outcome reaching us: free the row if it holds our token,
		// once its backend can no longer take it.
		pid := pc.Conn().PgConn().PID()
		discard(pc)
		m.c.core.Abandon(name, token, int64(pid))
	}
	switch {
	case errors.Is(err, pgx.ErrNoRows): // the row was deleted while we ran
		return nil, 0, nil
	case err != nil:
		return nil, 0, m.core.Failed(ctx, "acquiring", err)
	case fence == 0 && wait > 0:
		return nil, time.Duration(wait) * time.Millisecond, dblease.Abstaining("pglock", name, time.Duration(wait)*time.Millisecond)
	case fence == 0:
		return nil, time.Duration(left) * time.Millisecond, nil
	}
	return m.core.Granted(ctx, token, uint64(fence), start)
}
