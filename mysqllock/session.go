package mysqllock

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/dblease"
	"github.com/dlock-go/dlock/internal/lease"
)

// A SessionMutex is an exclusive lock in session mode: the lock's row, as
// a Mutex takes it, and a GET_LOCK lock that the lease takes on a
// connection of the pool and keeps, with that connection, for as long as
// it lasts. When the session ends, for any reason other than a release
// (the connection broken or killed, see ErrSessionLost; the database
// restarted; silent for the TTL, since the lease sets the session's
// wait_timeout to it), the holder learns within its check interval (a
// tenth of the TTL, between 20ms and 1s) if it can hear the database, and
// the lease ends; the row stays held until it expires, no sooner than the
// lease's Until, so that a holder that cannot hear is still safe until
// then. The fence comes from the row, as in lease mode.
//
// It needs a direct connection to the database, or a proxy that pins a
// client's session to one server connection: behind one that does not,
// the connection's session is not the lock's, which the watchdog
// detects and reports as a loss.
//
// A SessionMutex is not reentrant and not fair, like a Mutex. It holds no
// state of its own beyond its configuration; it is safe for concurrent
// use, and each Lock returns an independent Lease.
type SessionMutex struct {
	locker
	lockName string
}

var _ dlock.Locker = (*SessionMutex)(nil)

// NewSessionMutex returns the session-mode mutex called name, with the
// same rules for names as NewMutex. A name is one lock in both modes: a
// Mutex and a SessionMutex of the same name exclude each other. It never
// fails: a bad name or option is reported by Lock and TryLock.
func (c *Client) NewSessionMutex(name string, opts ...Option) *SessionMutex {
	m := &SessionMutex{lockName: sessionLockName(c.core.Cfg.Table, name)}
	m.locker = newLocker(c, name, "SessionMutex", true, opts, m.attempt)
	return m
}

// LockName returns the name of the lock's GET_LOCK lock, made from the
// Client's table and the lock's name, since GET_LOCK names are limited to
// 64 characters and compared without regard to case: "dlock:" and the
// first 20 bytes of the SHA-256 of "mysqllock", the table and the name,
// separated by NUL bytes, in hex. IS_USED_LOCK(LockName()) is the
// connection that holds it.
func (m *SessionMutex) LockName() string { return m.lockName }

// attempt takes a connection and tries the GET_LOCK lock, waiting up to
// block for it on the server, and the row on it once, with a fresh token.
func (m *SessionMutex) attempt(ctx context.Context, block time.Duration) (dlock.Lease, time.Duration, error) {
	conn, err := m.c.conn(ctx)
	if err != nil {
		return nil, 0, m.core.Failed(ctx, "connecting to take", err)
	}
	name, cfg := m.core.Name, m.core.Cfg
	gate, err := m.c.gate(ctx, conn, cfg)
	if err != nil {
		conn.end(ctx, err)
		return nil, 0, m.core.Failed(ctx, "acquiring", err)
	}
	token := lease.NewToken(ctx)
	var got sql.NullInt64
	var id, before int64
	err = conn.QueryRowContext(ctx, fill(m.c.sql.sessionGet, m.lockName, seconds(block))).Scan(&got, &id, &before)
	var fence uint64
	var left time.Duration
	var start time.Time
	sent := false // the token: by take, whose statements may run unheard
	switch {
	case err != nil:
	case !got.Valid && block > 0:
		// The server cut the wait short: MariaDB's max_statement_time
		// ends a GET_LOCK that waits longer so, with NULL. The lock was
		// held throughout: wait again, as long as the server lets.
		conn.done(ctx)
		return nil, dblease.Busy, nil
	case !got.Valid:
		err = fmt.Errorf("%w (GET_LOCK(%q))", errGetLockNull, m.lockName)
	case got.Int64 != 1:
		conn.done(ctx) // held by another session
		return nil, dblease.Busy, nil
	default:
		start = time.Now() // after the wait for GET_LOCK
		sent = true
		fence, left, err = m.c.take(ctx, conn, name, token, dblease.Units(cfg.TTL, time.Microsecond), gate)
		if err == nil && fence == 0 { // the row is held, or the server may not grant yet: let go of GET_LOCK
			if _, err := conn.ExecContext(ctx, fill(m.c.sql.sessionDrop, m.lockName)); err != nil {
				discard(conn.Conn)
			} else {
				conn.done(ctx)
			}
			if wait, err := m.c.abstaining(conn, name, gate); wait > 0 {
				return nil, wait, err
			}
			return nil, left, nil
		}
		if err == nil {
			_, err = conn.ExecContext(ctx, fill(m.c.sql.sessionKeep, waitTimeout(cfg)))
			if err != nil {
				discard(conn.Conn)
				m.c.core.Free(ctx, name, token)
				return nil, 0, m.core.Failed(ctx, "acquiring", err)
			}
		}
	}
	if err != nil {
		// The GET_LOCK lock may be the session's all the same, and the
		// statements may have run, or may yet run, without their outcome
		// reaching us. Closing the connection frees the GET_LOCK lock
		// once the server has read what was sent; the row, if the token
		// was sent for it, is freed in the background. A GET_LOCK that
		// failed, in its wait for the holder's release, say, sent none:
		// there is no row to free, and nothing for Close to wait for.
		discard(conn.Conn)
		if sent && !isServerError(err) {
			m.c.core.Abandon(name, token, id)
		}
		return nil, 0, m.core.Failed(ctx, "acquiring", err)
	}
	sc := &sessionConn{m: m, conn: conn, id: id, before: before, stop: make(chan struct{})}
	return m.core.SessionGranted(ctx, token, fence, start, sc, func() { discard(conn.Conn) })
}
