package pglock

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/dblease"
	"github.com/dlock-go/dlock/internal/lease"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A SessionMutex is an exclusive lock in session mode: the lock's row,
// as a Mutex takes it, and a session-level advisory lock that the lease
// takes with pg_try_advisory_lock on a connection of the pool and keeps,
// with that connection, for as long as it lasts. When the session ends,
// for any reason other than a release (the connection broken or
// terminated, see ErrSessionLost; the database restarted; silent for the
// TTL, since the lease sets the session's idle_session_timeout to it,
// PostgreSQL 14 or later), the holder learns at once if it can hear the
// database, and the lease ends; the row stays held until it expires, no
// sooner than the lease's Until, so that a holder that cannot hear is
// still safe until then. The fence comes from the row, as in lease mode.
//
// It needs a direct connection to the database, or a pooler in session
// mode: behind a pooler in transaction mode, the connection's session is
// not the lock's, which the watchdog detects and reports as a loss.
//
// A SessionMutex is not reentrant and not fair, like a Mutex. It holds no
// state of its own beyond its configuration; it is safe for concurrent
// use, and each Lock returns an independent Lease.
type SessionMutex struct {
	locker
	key int64
}

var _ dlock.Locker = (*SessionMutex)(nil)

// NewSessionMutex returns the session-mode mutex called name, with the
// same rules for names as NewMutex. A name is one lock in both modes: a
// Mutex and a SessionMutex of the same name exclude each other. It never
// fails: a bad name or option is reported by Lock and TryLock.
func (c *Client) NewSessionMutex(name string, opts ...Option) *SessionMutex {
	m := &SessionMutex{key: advisoryKey(c.cfg.table, name)}
	m.locker = newLocker(c, name, "SessionMutex", &c.leases.Sessions, opts, m.attempt)
	return m
}

// AdvisoryKey returns the key of the advisory lock, made from the
// Client's table and the lock's name: the first 8 bytes of the SHA-256 of
// "pglock", the table and the name, separated by NUL bytes. In pg_locks,
// its holder's row has locktype 'advisory', objsubid 1, the key's high 32
// bits as classid and its low 32 bits as objid.
func (m *SessionMutex) AdvisoryKey() int64 { return m.key }

// attempt takes a connection and tries the advisory lock and the row on
// it once, with a fresh token.
func (m *SessionMutex) attempt(ctx context.Context, _ time.Duration) (dlock.Lease, time.Duration, error) {
	pc, err := m.c.pool.Acquire(ctx)
	if err != nil {
		if cause := cancelled(ctx, err); cause != nil {
			return nil, 0, dlock.NotObtained(cause)
		}
		return nil, 0, m.c.describe("connecting to take", m.name, err)
	}
	token := lease.NewToken(ctx)
	start := time.Now()
	var fence, left *int64
	var pid uint32
	var before string
	var wait int64
	ttl := m.cfg.ttlMillis()
	identity, restart := m.cfg.windows(m.c.cfg.restart)
	err = m.c.take(ctx, pc, m.name, m.c.sql.sessionAcquire, []any{&fence, &pid, &before, &left, nil, &wait},
		m.name, token, ttl, m.c.obj.sequence, m.key, strconv.FormatInt(ttl, 10), identity, restart)
	if err != nil {
		// The lock may be the session's all the same: an advisory lock
		// outlives the statement that took it, and the statements may
		// have run, or may yet run, without their outcome reaching us.
		// Closing the connection frees the advisory lock once the
		// backend has read what was sent; the row is freed in the
		// background.
		backend := pc.Conn().PgConn().PID()
		discard(pc)
		if !isServerError(err) && !pgconn.SafeToRetry(err) {
			m.c.abandon(m.name, token, backend)
		}
		if cause := cancelled(ctx, err); cause != nil {
			return nil, 0, dlock.NotObtained(cause)
		}
		return nil, 0, m.c.describe("acquiring", m.name, err)
	}
	if fence == nil {
		pc.Release()
		if wait > 0 {
			return nil, time.Duration(wait) * time.Millisecond, dblease.Abstaining("pglock", m.name, time.Duration(wait)*time.Millisecond)
		}
		if left != nil {
			return nil, time.Duration(*left) * time.Millisecond, nil
		}
		return nil, 0, nil
	}
	until := lease.Validity(start, m.cfg.TTL)
	if !time.Now().Before(until) {
		// Too slow to be a lease: a State made with its Until past would
		// end, and run its clean-up, before it was fully made. Closing the
		// connection frees the advisory lock; the row is freed too.
		discard(pc)
		m.c.free(ctx, m.name, token)
		return nil, time.Millisecond, dlock.NotObtained(fmt.Errorf("pglock: acquiring %q took %v, longer than the TTL %v less the drift allowance",
			m.name, time.Since(start), m.cfg.TTL))
	}
	conn := &sessionConn{m: m, conn: pc, pid: pid, before: before}
	s := dblease.NewSession(ctx, m.c.leases, m.ev, m.name, token, uint64(*fence), until, m.cfg.Config, conn)
	if *fence > maxFence {
		s.Release(context.WithoutCancel(ctx)) // never handed out: frees the row and the advisory lock
		return nil, 0, m.c.fenceOutOfRange(m.name, *fence)
	}
	if cause := cancelled(ctx, nil); cause != nil {
		// Do not hand a lock to a caller that has stopped waiting for it.
		s.End(dlock.Lost(cause))
		return nil, 0, dlock.NotObtained(cause)
	}
	if !time.Now().Before(s.Until()) {
		s.End(dlock.Lost(dlock.ErrExpired))
		return nil, time.Millisecond, dlock.NotObtained(fmt.Errorf("pglock: acquiring %q took %v, longer than the TTL %v less the drift allowance",
			m.name, time.Since(start), m.cfg.TTL))
	}
	if err := s.Keep(); err != nil {
		return nil, 0, err
	}
	if err := lease.Fresh(ctx, s, m.cfg.TTL); err != nil {
		return nil, time.Millisecond, err
	}
	return s, 0, nil
}

// discard closes a connection of the pool that may hold an advisory lock,
// or run a statement that may take a lock's row, and hands it back to the
// pool, which drops it. It closes the socket itself, at once: pgx may
// still be trying to cancel an interrupted statement, which takes up to
// 15 seconds when the database cannot be reached, and the backend ends,
// freeing the advisory lock, only when it reads the end of the connection
// (after what was sent before it).
func discard(pc *pgxpool.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	pg := pc.Conn().PgConn()
	pg.Close(ctx)
	pg.Conn().Close()
	pc.Release()
}

// sessionLost returns the cause of a loss of the session: ErrSessionLost
// and the connection's error.
func sessionLost(err error) error { return fmt.Errorf("%w: %w", ErrSessionLost, err) }
