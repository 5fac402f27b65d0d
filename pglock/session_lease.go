package pglock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/dblease"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A sessionConn is a SessionMutex's lease's connection, whose session
// holds the advisory lock; the lease itself is a dblease.Session.
//
// Between uses, a goroutine waits on the connection for anything the
// database sends, as a listener would: a session that the database ends
// (pg_terminate_backend, idle_session_timeout, a shutdown) says so with a
// FATAL error before it closes the connection, and a broken connection
// fails the read. Either ends the lease at once. A use of the connection
// (a confirmation, the release) stops that goroutine first, and starts it
// again after.
type sessionConn struct {
	m      *SessionMutex
	pid    uint32 // the backend that took the lock
	before string // the idle_session_timeout to restore on release

	mu      sync.Mutex    // held while the connection is in use
	conn    *pgxpool.Conn // nil once given back to the pool
	unwatch context.CancelFunc
	watched chan struct{} // closed when the watching goroutine has returned
}

var _ dblease.SessionConn = (*sessionConn)(nil)

// Watch starts the goroutine that waits on the idle connection.
func (c *sessionConn) Watch(s *dblease.Session) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.watchLocked(s)
}

// Stop does nothing: the goroutine stops when the lease's end gives the
// connection back or closes it.
func (c *sessionConn) Stop() {}

func (c *sessionConn) watchLocked(s *dblease.Session) {
	if c.conn == nil || s.Err() != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	c.unwatch, c.watched = cancel, done
	pg := c.conn.Conn().PgConn()
	go func() {
		defer close(done)
		for {
			err := pg.WaitForNotification(ctx)
			switch {
			case ctx.Err() != nil: // stopped for a use of the connection
				return
			case err != nil:
				s.End(dlock.Lost(c.m.c.core.SessionLost(err)))
				return
			}
		}
	}()
}

// stopWatchLocked stops the watching goroutine, if any, and waits for it.
// The connection stays usable: a cancelled wait for a notification only
// interrupts a read.
func (c *sessionConn) stopWatchLocked() {
	if c.unwatch != nil {
		c.unwatch()
		<-c.watched
		c.unwatch = nil
	}
}

// Confirm extends the row, on the lease's connection, to the TTL from
// now, and reads its backend's PID: an answer that names the backend
// which took the advisory lock proves that the session was alive, and
// the row still the lease's, when the request was sent. It returns when
// the request was sent, and dblease.ErrNotHeld if the row is not the
// lease's any more. On any other failure it closes the connection, which
// makes sure the advisory lock goes.
func (c *sessionConn) Confirm(ctx context.Context, s *dblease.Session) (time.Time, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil {
		return time.Time{}, dblease.ErrEnded
	}
	c.stopWatchLocked()
	start := time.Now()
	var pid uint32
	err := queryRow(ctx, c.conn, []any{&pid}, c.m.c.sql.sessionRefresh, c.m.core.Name, s.Token(), dblease.Units(c.m.core.Cfg.TTL, time.Millisecond))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		c.watchLocked(s)
		return start, dblease.ErrNotHeld
	case err == nil && pid != c.pid:
		err = fmt.Errorf("the connection reaches backend %d, not %d, which took the lock (a pooler in transaction mode?)", pid, c.pid)
	}
	if err != nil {
		discard(c.conn)
		c.conn = nil
		return start, err
	}
	c.watchLocked(s)
	return start, nil
}

// Unlock frees the row and the advisory lock, restores the session's
// idle_session_timeout and notifies waiters on the lease's connection,
// and gives the connection back to the pool, or closes it if anything
// failed. It reports whether the row was the lease's.
func (c *sessionConn) Unlock(ctx context.Context, s *dblease.Session) (freed bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil {
		return false, dblease.ErrEnded
	}
	c.stopWatchLocked()
	var unlocked bool
	err = queryRow(ctx, c.conn, []any{&freed, &unlocked, nil}, c.m.c.sql.sessionRelease, c.m.core.Name, s.Token(), c.m.key, c.before, c.m.c.obj.channel)
	if err == nil && unlocked {
		c.conn.Release()
	} else {
		discard(c.conn)
	}
	c.conn = nil
	return freed, err
}

// ReleaseFailed ends s after its Unlock failed with err: the connection
// is closed, which frees the advisory lock. A session the database had
// ended is lost; a release never sent frees the row through the pool; any
// other failure frees it in the background.
func (c *sessionConn) ReleaseFailed(ctx context.Context, s *dblease.Session, err error) error {
	switch {
	case endedByServer(err):
		// The database had ended the session, and with it the advisory
		// lock, before the release reached it: the message said so.
		s.End(dlock.Lost(c.m.c.core.SessionLost(err)))
		return nil
	case pgconn.SafeToRetry(err):
		// The connection was closed before the release was sent (the
		// database ended the session, and the watcher has not said so
		// yet): the advisory lock is gone; free the row, if it is still
		// ours, through the pool.
		if freed, err := c.m.c.release(ctx, s.Key(), s.Token()); err == nil && !freed {
			s.End(dlock.Lost(ErrSessionLost))
			return nil
		} else if err == nil {
			s.End(dlock.ErrReleased)
			return nil
		}
	}
	c.m.c.core.Abandon(s.Key(), s.Token(), 0)
	if s.End(dlock.ErrReleased) {
		return fmt.Errorf("pglock: release of %q did not complete (its connection is closed instead, which frees the advisory lock, and the row is freed in the background; at worst it expires within its TTL): %w",
			s.Key(), c.m.c.describe("releasing", s.Key(), err))
	}
	return nil
}
