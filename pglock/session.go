package pglock

import (
	"context"
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
	m := &SessionMutex{key: advisoryKey(c.core.Cfg.Table, name)}
	m.locker = newLocker(c, name, "SessionMutex", true, opts, m.attempt)
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
		return nil, 0, m.core.Failed(ctx, "connecting to take", err)
	}
	name, cfg := m.core.Name, m.core.Cfg
	token := lease.NewToken(ctx)
	start := time.Now()
	var fence, left *int64
	var pid uint32
	var before string
	var wait int64
	ttl := dblease.Units(cfg.TTL, time.Millisecond)
	identity, restart := cfg.Windows(m.c.core.Cfg.Restart, time.Millisecond)
	err = m.c.take(ctx, pc, name, m.c.sql.sessionAcquire, []any{&fence, &pid, &before, &left, nil, &wait},
		name, token, ttl, m.c.obj.sequence, m.key, strconv.FormatInt(ttl, 10), identity, restart)
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
			m.c.core.Abandon(name, token, int64(backend))
		}
		return nil, 0, m.core.Failed(ctx, "acquiring", err)
	}
	if fence == nil {
		pc.Release()
		if wait > 0 {
			return nil, time.Duration(wait) * time.Millisecond, dblease.Abstaining("pglock", name, time.Duration(wait)*time.Millisecond)
		}
		if left != nil {
			return nil, time.Duration(*left) * time.Millisecond, nil
		}
		return nil, 0, nil
	}
	conn := &sessionConn{m: m, conn: pc, pid: pid, before: before}
	return m.core.SessionGranted(ctx, token, uint64(*fence), start, conn, func() { discard(pc) })
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
